/* A stand-in for the CUDA driver's library (libcuda.so.1) on machines without a GPU: the few
 * driver API calls gpu-accept's probe makes, with the same C signatures, answering from the
 * environment. Built by tests/cuda_driver.py.
 *
 *   FAKE_CUDA_UUIDS      comma-separated UUIDs (32 hex digits each, dashes allowed), one per device
 *   FAKE_CUDA_NO_PEER    comma-separated "i-j" pairs (driver ordinals) without peer access
 *   FAKE_CUDA_INIT       the status cuInit returns (default 0)
 *   FAKE_CUDA_MULTICAST  the multicast attribute's value for every device (default 0)
 *   CUDA_VISIBLE_DEVICES applied as the driver applies it: ordinals, in the order given
 *
 * Built with -DWITHOUT_PEER_CALL, it lacks cuDeviceCanAccessPeer (a library that is not the driver).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct { char bytes[16]; } CUuuid;

#define MAX_DEVICES 64
static int visible[MAX_DEVICES];
static int visible_count = -1;
static unsigned char uuids[MAX_DEVICES][16];
static int uuid_count = 0;

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void read_uuids(void) {
    const char *text = getenv("FAKE_CUDA_UUIDS");
    uuid_count = 0;
    if (!text) return;
    int nibble = 0;
    for (const char *p = text; *p && uuid_count < MAX_DEVICES; p++) {
        if (*p == ',') { uuid_count++; nibble = 0; continue; }
        int v = hex_value(*p);
        if (v < 0 || nibble >= 32) continue;
        if (nibble % 2 == 0) uuids[uuid_count][nibble / 2] = (unsigned char)(v << 4);
        else uuids[uuid_count][nibble / 2] |= (unsigned char)v;
        nibble++;
    }
    if (*text) uuid_count++;
}

CUresult cuInit(unsigned int flags) {
    (void)flags;
    const char *status = getenv("FAKE_CUDA_INIT");
    if (status && atoi(status) != 0) return atoi(status);
    read_uuids();
    const char *mask = getenv("CUDA_VISIBLE_DEVICES");
    if (!mask) {
        visible_count = uuid_count;
        for (int i = 0; i < uuid_count; i++) visible[i] = i;
        return 0;
    }
    visible_count = 0;
    char copy[1024];
    strncpy(copy, mask, sizeof copy - 1);
    copy[sizeof copy - 1] = 0;
    for (char *item = strtok(copy, ","); item && visible_count < MAX_DEVICES; item = strtok(NULL, ",")) {
        int ordinal = atoi(item);
        if (ordinal < 0 || ordinal >= uuid_count) break; /* the driver stops at the first invalid entry */
        visible[visible_count++] = ordinal;
    }
    return visible_count == 0 ? 100 /* CUDA_ERROR_NO_DEVICE */ : 0;
}

CUresult cuGetErrorName(CUresult error, const char **name) {
    switch (error) {
    case 3: *name = "CUDA_ERROR_NOT_INITIALIZED"; return 0;
    case 100: *name = "CUDA_ERROR_NO_DEVICE"; return 0;
    case 101: *name = "CUDA_ERROR_INVALID_DEVICE"; return 0;
    case 999: *name = "CUDA_ERROR_UNKNOWN"; return 0;
    default: *name = NULL; return 1;
    }
}

CUresult cuDeviceGetCount(int *count) {
    if (visible_count < 0) return 3;
    *count = visible_count;
    return 0;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    if (visible_count < 0) return 3;
    if (ordinal < 0 || ordinal >= visible_count) return 101;
    *device = ordinal;
    return 0;
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice device) {
    if (device < 0 || device >= visible_count) return 101;
    memcpy(uuid->bytes, uuids[visible[device]], 16);
    return 0;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice device) { return cuDeviceGetUuid_v2(uuid, device); }

#ifndef WITHOUT_PEER_CALL
CUresult cuDeviceCanAccessPeer(int *can, CUdevice device, CUdevice peer) {
    if (device < 0 || device >= visible_count || peer < 0 || peer >= visible_count) return 101;
    char pair[32];
    snprintf(pair, sizeof pair, "%d-%d", visible[device], visible[peer]);
    const char *none = getenv("FAKE_CUDA_NO_PEER");
    *can = 1;
    if (none) {
        char copy[1024];
        strncpy(copy, none, sizeof copy - 1);
        copy[sizeof copy - 1] = 0;
        for (char *item = strtok(copy, ","); item; item = strtok(NULL, ","))
            if (strcmp(item, pair) == 0) *can = 0;
    }
    return 0;
}
#endif

CUresult cuDeviceGetAttribute(int *value, int attribute, CUdevice device) {
    if (device < 0 || device >= visible_count) return 101;
    if (attribute != 132) return 1; /* only CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED is asked */
    const char *multicast = getenv("FAKE_CUDA_MULTICAST");
    *value = multicast ? atoi(multicast) : 0;
    return 0;
}
