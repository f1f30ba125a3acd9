"""What the test host is: the CPU model, LLVM's name for the host CPU, the Vulkan devices and drivers.

    python3 tests/host_probe.py            # the line the test run starts with
    python3 tests/host_probe.py --vulkan   # the Vulkan devices only (what the line runs in a subprocess)

Without quadrants: the Vulkan devices through the loader with ctypes (vkGetPhysicalDeviceProperties2
with VkPhysicalDeviceDriverProperties: the driver's name and version, e.g. 'Mesa 22.3.6'), the host
CPU as LLVM names it (the -mcpu the cpu backend compiles for) from `llc --version`, since the core
has no binding for llvm::sys::getHostCPUName. The pytest plugin (qd_pytest_plugin.py) runs the
Vulkan probe in a subprocess with a timeout, so a broken driver cannot crash or hang the run.
"""
import ctypes
import os
import platform
import re
import shutil
import signal
import subprocess
import sys

LLC = ("llc-19", "llc")  # LLVM 19: the version the core links (CMakeLists.txt)
_VK_API_1_2 = (1 << 22) | (2 << 12)
_STYPE_PROPERTIES_2 = 1000059001
_STYPE_DRIVER_PROPERTIES = 1000196000


def cpu_model():
    """The CPU's model name from /proc/cpuinfo (x86: 'model name'), else platform's."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "cpu model", "Processor") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def start_llc():
    """A running `llc --version` (read by llvm_host_cpu), or None when no llc is installed."""
    llc = next((p for p in map(shutil.which, LLC) if p), None)
    if llc is None:
        return None
    return subprocess.Popen([llc, "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def llvm_host_cpu(proc, timeout=5.0):
    """'znver4' from `llc --version`'s 'Host CPU:' line."""
    if proc is None:
        return "unknown (no llc-19)"
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return "unknown (llc --version timed out)"
    m = re.search(r"Host CPU:\s*(\S+)", out or "")
    return m.group(1) if m else "unknown"


def start_vulkan_probe():
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), "--vulkan"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)


def vulkan_result(proc, timeout=5.0):
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return f"the probe hung (killed after {timeout:g} s)"
    if proc.returncode < 0:
        try:
            name = signal.Signals(-proc.returncode).name
        except ValueError:
            name = f"signal {-proc.returncode}"
        return f"the probe crashed ({name})"
    return (out or "").strip() or f"the probe failed (exit status {proc.returncode})"


def _cstr(raw):
    return bytes(raw).split(b"\0", 1)[0].decode("utf-8", "replace")


def vulkan_devices():
    """'DEVICE, driver DRIVER INFO, Vulkan X.Y' per physical device, '; '-separated."""
    c = ctypes
    try:
        vk = c.CDLL("libvulkan.so.1")
    except OSError:
        return "no Vulkan loader (libvulkan.so.1)"

    class AppInfo(c.Structure):
        _fields_ = [("sType", c.c_int), ("pNext", c.c_void_p), ("pApplicationName", c.c_char_p),
                    ("applicationVersion", c.c_uint32), ("pEngineName", c.c_char_p), ("engineVersion", c.c_uint32),
                    ("apiVersion", c.c_uint32)]

    class InstanceInfo(c.Structure):
        _fields_ = [("sType", c.c_int), ("pNext", c.c_void_p), ("flags", c.c_uint32),
                    ("pApplicationInfo", c.POINTER(AppInfo)), ("enabledLayerCount", c.c_uint32),
                    ("ppEnabledLayerNames", c.c_void_p), ("enabledExtensionCount", c.c_uint32),
                    ("ppEnabledExtensionNames", c.c_void_p)]

    class DriverProps(c.Structure):
        _fields_ = [("sType", c.c_int), ("pNext", c.c_void_p), ("driverID", c.c_int), ("driverName", c.c_char * 256),
                    ("driverInfo", c.c_char * 256), ("conformanceVersion", c.c_uint8 * 4)]

    class Props2(c.Structure):  # VkPhysicalDeviceProperties (824 bytes on 64-bit) as raw bytes
        _fields_ = [("sType", c.c_int), ("pNext", c.c_void_p), ("properties", c.c_uint64 * 256)]

    app = AppInfo(0, None, b"quadrants-tests", 0, b"quadrants", 0, _VK_API_1_2)
    info = InstanceInfo(1, None, 0, c.pointer(app), 0, None, 0, None)
    instance = c.c_void_p()
    if vk.vkCreateInstance(c.byref(info), None, c.byref(instance)) != 0:
        app.apiVersion = 1 << 22
        r = vk.vkCreateInstance(c.byref(info), None, c.byref(instance))
        if r != 0:
            return f"no Vulkan instance (vkCreateInstance: {r})"
    try:
        n = c.c_uint32()
        vk.vkEnumeratePhysicalDevices(instance, c.byref(n), None)
        devices = (c.c_void_p * n.value)()
        vk.vkEnumeratePhysicalDevices(instance, c.byref(n), devices)
        out = []
        for d in devices[:n.value]:
            p2 = Props2(_STYPE_PROPERTIES_2, None)
            vk.vkGetPhysicalDeviceProperties(c.c_void_p(d), c.byref(p2, Props2.properties.offset))
            raw = bytes(p2.properties)
            api, version = int.from_bytes(raw[0:4], "little"), int.from_bytes(raw[4:8], "little")
            name = _cstr(raw[20:276])
            driver = None
            if api >= _VK_API_1_2 and app.apiVersion >= _VK_API_1_2:
                props = DriverProps(_STYPE_DRIVER_PROPERTIES, None)
                p2.pNext = c.cast(c.pointer(props), c.c_void_p)
                vk.vkGetPhysicalDeviceProperties2(c.c_void_p(d), c.byref(p2))
                dname, dinfo = _cstr(props.driverName), _cstr(props.driverInfo)
                driver = dinfo if not dname or dname.lower() in name.lower() else f"{dname} {dinfo}".strip()
            if not driver:  # the Mesa encoding of VkPhysicalDeviceProperties::driverVersion
                driver = f"version {version >> 22}.{(version >> 12) & 0x3FF}.{version & 0xFFF}"
            out.append(f"{name}, driver {driver}, Vulkan {api >> 22}.{(api >> 12) & 0x3FF}")
        return "; ".join(out) or "no Vulkan device"
    finally:
        vk.vkDestroyInstance(instance, None)


def host_line(vulkan=True, timeout=5.0):
    """'quadrants test host: CPU MODEL (N cores), LLVM host CPU NAME; vulkan: DEVICE, driver ...'."""
    llc = start_llc()
    probe = start_vulkan_probe() if vulkan else None
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 0
    line = f"quadrants test host: CPU {cpu_model()} ({cores} cores), LLVM host CPU {llvm_host_cpu(llc, timeout)}"
    return line + "; vulkan: " + (vulkan_result(probe, timeout) if probe else "not probed (QD_WANTED_ARCHS)")


if __name__ == "__main__":
    if sys.argv[1:] == ["--vulkan"]:
        print(vulkan_devices())
    else:
        print(host_line())
