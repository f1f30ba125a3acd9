"""The backends: qd.cpu, qd.cuda, qd.amdgpu, qd.vulkan, qd.metal."""


class Arch:
    """A backend: qd.cpu, qd.cuda, qd.amdgpu, qd.vulkan, qd.metal."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


cpu, cuda, amdgpu, vulkan, metal = (Arch(n) for n in ("cpu", "cuda", "amdgpu", "vulkan", "metal"))
gpu = [cuda, amdgpu, vulkan, metal]
ALL_ARCHS = [cpu, cuda, amdgpu, vulkan, metal]


def arch_from_name(name):
    for a in ALL_ARCHS:
        if a.name == name:
            return a
    raise ValueError(f"unknown arch '{name}'; choose one of {[a.name for a in ALL_ARCHS]}")
