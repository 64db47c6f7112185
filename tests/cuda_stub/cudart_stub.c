/*
 * A stand-in for libcudart.so, for inferperf's tests on machines without a GPU.
 *
 * "Device memory" is a POSIX shared memory object per allocation, mapped into the process,
 * so another process (the reference server) can open it from its IPC handle, whose 64 bytes
 * carry the object's name. cudaMemcpy only copies between ranges it knows: an allocation
 * or an opened handle on the device side, so a bad size from a peer is an error here, not
 * a crash. cudaFree unmaps and unlinks the object.
 *
 * Environment: INFERPERF_CUDASTUB_DEVICES = number of devices (default 1).
 * Test hook: inferperf_cudastub_live_allocations() = allocations not freed yet.
 *
 * Build: gcc -shared -fPIC -O2 -o libcudart.so cudart_stub.c -lpthread -lrt
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The cudaError_t values the stub returns (same numbers as the real runtime). */
enum {
    SUCCESS = 0,
    INVALID_VALUE = 1,
    MEMORY_ALLOCATION = 2,
    NO_DEVICE = 100,
    INVALID_DEVICE = 101,
    INVALID_DEVICE_POINTER = 17,
    MAP_BUFFER_OBJECT_FAILED = 205,
};

typedef struct {
    char reserved[64];
} cudaIpcMemHandle_t;

/* One mapped range: an allocation of ours (owned, unlinked on free) or an opened handle. */
typedef struct {
    char *base;
    size_t len;
    int owned;
    char name[64];
} mapping_t;

#define MAX_MAPPINGS 4096

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static mapping_t mappings[MAX_MAPPINGS];
static int live_allocations;
static unsigned long next_id;
static __thread int current_device;

static int device_count(void) {
    const char *v = getenv("INFERPERF_CUDASTUB_DEVICES");
    if (v == NULL || *v == '\0') return 1;
    return atoi(v);
}

int cudaGetDeviceCount(int *count) {
    if (count == NULL) return INVALID_VALUE;
    *count = device_count();
    return *count > 0 ? SUCCESS : NO_DEVICE;
}

int cudaSetDevice(int device) {
    if (device < 0 || device >= device_count()) return INVALID_DEVICE;
    current_device = device;
    return SUCCESS;
}

const char *cudaGetErrorString(int error) {
    switch (error) {
    case SUCCESS: return "no error";
    case INVALID_VALUE: return "invalid argument";
    case MEMORY_ALLOCATION: return "out of memory";
    case NO_DEVICE: return "no CUDA-capable device is detected";
    case INVALID_DEVICE: return "invalid device ordinal";
    case INVALID_DEVICE_POINTER: return "invalid device pointer";
    case MAP_BUFFER_OBJECT_FAILED: return "mapping of buffer object failed";
    default: return "unrecognized error code";
    }
}

const char *cudaGetErrorName(int error) {
    return error == SUCCESS ? "cudaSuccess" : "cudaErrorStub";
}

/* Records a mapping; the caller holds the lock. */
static int remember(char *base, size_t len, int owned, const char *name) {
    for (int i = 0; i < MAX_MAPPINGS; i++) {
        if (mappings[i].base == NULL) {
            mappings[i].base = base;
            mappings[i].len = len;
            mappings[i].owned = owned;
            snprintf(mappings[i].name, sizeof mappings[i].name, "%s", name);
            return 1;
        }
    }
    return 0;
}

/* The mapping starting at `base`, or NULL; the caller holds the lock. */
static mapping_t *find_base(const void *base) {
    for (int i = 0; i < MAX_MAPPINGS; i++) {
        if (mappings[i].base != NULL && mappings[i].base == base) return &mappings[i];
    }
    return NULL;
}

/* Is [p, p+len) inside one known mapping? The caller holds the lock. */
static int inside(const void *p, size_t len) {
    const char *c = p;
    for (int i = 0; i < MAX_MAPPINGS; i++) {
        mapping_t *m = &mappings[i];
        if (m->base != NULL && c >= m->base && c <= m->base + m->len &&
            len <= (size_t)(m->base + m->len - c))
            return 1;
    }
    return 0;
}

static void *map_object(int fd, size_t len) {
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return p == MAP_FAILED ? NULL : p;
}

int cudaMalloc(void **ptr, size_t size) {
    if (ptr == NULL) return INVALID_VALUE;
    size_t len = size == 0 ? 1 : size;
    char name[64];
    pthread_mutex_lock(&lock);
    snprintf(name, sizeof name, "/ipcudastub_%d_%lu", (int)getpid(), next_id++);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, S_IRUSR | S_IWUSR);
    void *p = NULL;
    if (fd >= 0) {
        if (ftruncate(fd, (off_t)len) == 0) p = map_object(fd, len);
        close(fd);
    }
    if (p == NULL || !remember(p, len, 1, name)) {
        if (p != NULL) munmap(p, len);
        if (fd >= 0) shm_unlink(name);
        pthread_mutex_unlock(&lock);
        return MEMORY_ALLOCATION;
    }
    live_allocations++;
    pthread_mutex_unlock(&lock);
    *ptr = p;
    return SUCCESS;
}

int cudaFree(void *ptr) {
    if (ptr == NULL) return SUCCESS;
    pthread_mutex_lock(&lock);
    mapping_t *m = find_base(ptr);
    if (m == NULL || !m->owned) {
        pthread_mutex_unlock(&lock);
        return INVALID_DEVICE_POINTER;
    }
    munmap(m->base, m->len);
    shm_unlink(m->name);
    memset(m, 0, sizeof *m);
    live_allocations--;
    pthread_mutex_unlock(&lock);
    return SUCCESS;
}

/* kind: 1 host to device, 2 device to host, 3 device to device. */
int cudaMemcpy(void *dst, const void *src, size_t count, int kind) {
    if (count == 0) return SUCCESS;
    pthread_mutex_lock(&lock);
    int ok = 0;
    switch (kind) {
    case 1: ok = inside(dst, count); break;
    case 2: ok = inside(src, count); break;
    case 3: ok = inside(dst, count) && inside(src, count); break;
    default: ok = 0;
    }
    if (ok) memmove(dst, src, count);
    pthread_mutex_unlock(&lock);
    return ok ? SUCCESS : INVALID_VALUE;
}

int cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *ptr) {
    if (handle == NULL) return INVALID_VALUE;
    pthread_mutex_lock(&lock);
    mapping_t *m = find_base(ptr);
    int rc = INVALID_DEVICE_POINTER;
    if (m != NULL && m->owned) {
        memset(handle, 0, sizeof *handle);
        memcpy(handle->reserved, m->name, strlen(m->name));
        rc = SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

int cudaIpcOpenMemHandle(void **ptr, cudaIpcMemHandle_t handle, unsigned int flags) {
    (void)flags;
    if (ptr == NULL) return INVALID_VALUE;
    char name[65];
    memcpy(name, handle.reserved, 64);
    name[64] = '\0';
    if (name[0] != '/') return INVALID_VALUE;
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) return MAP_BUFFER_OBJECT_FAILED;
    struct stat st;
    void *p = NULL;
    if (fstat(fd, &st) == 0 && st.st_size > 0) p = map_object(fd, (size_t)st.st_size);
    close(fd);
    if (p == NULL) return MAP_BUFFER_OBJECT_FAILED;
    pthread_mutex_lock(&lock);
    int kept = remember(p, (size_t)st.st_size, 0, name);
    pthread_mutex_unlock(&lock);
    if (!kept) {
        munmap(p, (size_t)st.st_size);
        return MEMORY_ALLOCATION;
    }
    *ptr = p;
    return SUCCESS;
}

int cudaIpcCloseMemHandle(void *ptr) {
    pthread_mutex_lock(&lock);
    mapping_t *m = find_base(ptr);
    int rc = INVALID_DEVICE_POINTER;
    if (m != NULL && !m->owned) {
        munmap(m->base, m->len);
        memset(m, 0, sizeof *m);
        rc = SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

int inferperf_cudastub_live_allocations(void) {
    pthread_mutex_lock(&lock);
    int n = live_allocations;
    pthread_mutex_unlock(&lock);
    return n;
}
