"""qd.graph: the reference's graph-structuring kernel constructs. `while qd.graph.do_while(flag):`
in a @qd.kernel(graph=True) kernel repeats its body while the scalar i32 ndarray `flag` is non-zero,
checking it after each pass (a do-while). The reference captures graph kernels into CUDA graphs; this
implementation has no graph launch, so graph=True changes nothing about how a kernel launches and a
do_while loop runs inside the kernel, its for-loops serially (docs/language.md)."""


def do_while(condition):
    """`while qd.graph.do_while(flag):` in a @qd.kernel(graph=True) kernel; the walker compiles the
    loop (lang/ast/builder.py). Called in Python scope it is bool(condition)."""
    return bool(condition)


do_while._qd_graph_do_while = True

__all__ = ["do_while"]
