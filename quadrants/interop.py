"""qd.interop: handles for sharing a device with other frameworks."""


def get_mps_command_queue():
    """The MTLCommandQueue* that PyTorch's MPS backend uses, for sharing one Metal queue with it: 0
    here, where no Metal device runs (Metal kernels are compiled to MSL but not launched; docs/backends.md)."""
    return 0
