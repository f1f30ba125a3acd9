"""qd.sparse: the reference's sparse grids (pointer / bitmasked / dynamic SNodes). Not supported here:
every field is dense (docs/language.md, "Fields")."""


def _unsupported(name):
    raise NotImplementedError(f"qd.sparse.{name}: sparse SNodes (pointer, bitmasked, dynamic) are not supported; "
                              "Quadrants fields are dense")


def grid(*args, **kwargs):
    """A sparse grid of pointer / bitmasked blocks: not supported (NotImplementedError)."""
    _unsupported("grid")


def usage(grid):
    """The fraction of a sparse grid's blocks that are active: not supported (NotImplementedError)."""
    _unsupported("usage")
