/* A stand-in for the CUDA driver (libcuda.so.1) that records what the CUDA runtime asks of it: one
 * device (compute capability 9.0), "device" memory in host memory, kernels that do nothing when
 * launched. Each launch and function attribute is appended to the file $QD_FAKE_CUDA_LOG. Built by
 * tests/python/test_cuda_launch_stub.py; for checking the launch path on machines without a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
static void log_line(const char *line) {
  const char *path = getenv("QD_FAKE_CUDA_LOG");
  FILE *f = path ? fopen(path, "a") : NULL;
  if (!f) return;
  fputs(line, f);
  fclose(f);
}

CUresult cuInit(unsigned flags) { return 0; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
CUresult cuDeviceGet(int *d, int ordinal) { *d = ordinal; return ordinal == 0 ? 0 : 101; }
CUresult cuDeviceGetAttribute(int *v, int attribute, int d) {
  switch (attribute) {
    case 75: *v = 9; break;        /* compute capability major */
    case 76: *v = 0; break;        /* minor */
    case 16: *v = 2; break;        /* multiprocessors */
    case 39: *v = 2048; break;     /* threads per multiprocessor */
    case 97: *v = 232448; break;   /* shared memory per block, opt-in: 227 KiB */
    default: *v = 0;
  }
  return 0;
}
CUresult cuDeviceGetName(char *name, int len, int d) { snprintf(name, len, "stub"); return 0; }
CUresult cuDevicePrimaryCtxRetain(void **ctx, int d) { *ctx = (void *)0x1; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(int d) { return 0; }
CUresult cuCtxSetCurrent(void *ctx) { return 0; }
CUresult cuCtxSynchronize(void) { return 0; }
CUresult cuCtxSetLimit(int limit, size_t value) {
  char line[512];
  snprintf(line, sizeof line, "limit %d %zu\n", limit, value);
  log_line(line);
  return 0;
}
CUresult cuModuleLoadDataEx(void **m, const void *image, unsigned n, int *opts, void **vals) { *m = (void *)0x2; return 0; }
CUresult cuModuleUnload(void *m) { return 0; }
CUresult cuModuleGetFunction(void **f, void *m, const char *name) { *f = strdup(name); return 0; }
CUresult cuFuncSetAttribute(void *f, int attribute, int value) {
  char line[512];
  snprintf(line, sizeof line, "attribute %s %d %d\n", (const char *)f, attribute, value);
  log_line(line);
  return 0;
}
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra) {
  char line[512];
  snprintf(line, sizeof line, "launch %s block=%u shared=%u\n", (const char *)f, bx, shared);
  log_line(line);
  return 0;
}
CUresult cuMemAlloc_v2(unsigned long long *p, size_t n) { *p = (unsigned long long)calloc(1, n); return 0; }
CUresult cuMemFree_v2(unsigned long long p) { free((void *)p); return 0; }
CUresult cuMemcpyHtoD_v2(unsigned long long d, const void *s, size_t n) { memcpy((void *)d, s, n); return 0; }
CUresult cuMemcpyDtoH_v2(void *d, unsigned long long s, size_t n) { memcpy(d, (void *)s, n); return 0; }
CUresult cuMemsetD8_v2(unsigned long long d, unsigned char v, size_t n) { memset((void *)d, v, n); return 0; }
CUresult cuGetErrorName(CUresult r, const char **s) { *s = "CUDA_ERROR_STUB"; return 0; }
CUresult cuGetErrorString(CUresult r, const char **s) { *s = "stub error"; return 0; }
