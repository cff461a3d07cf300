/* dlpack.h - the DLPack 1.0 exchange structs (the public DLPack
 * specification, dmlc/dlpack), written out here so the extension needs no
 * header from torch or numpy. Only what gkv uses: CPU tensors of the
 * dtypes gkv stores, exchanged through DLManagedTensorVersioned (DLPack
 * 1.x) or the legacy DLManagedTensor (before 1.0). The layouts are an ABI:
 * do not reorder fields. */
#ifndef GKVPY_DLPACK_H
#define GKVPY_DLPACK_H
#include <stdint.h>

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 0

#define DLPACK_FLAG_BITMASK_READ_ONLY (1ull << 0)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1ull << 1)

typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

typedef enum {
    kDLCPU = 1,
    kDLCUDA = 2,
    kDLCUDAHost = 3,
    kDLOpenCL = 4,
    kDLVulkan = 7,
    kDLMetal = 8,
    kDLVPI = 9,
    kDLROCM = 10,
    kDLROCMHost = 11,
    kDLExtDev = 12,
    kDLCUDAManaged = 13,
    kDLOneAPI = 14,
    kDLWebGPU = 15,
    kDLHexagon = 16
} DLDeviceType;

typedef struct {
    DLDeviceType device_type;
    int32_t device_id;
} DLDevice;

typedef enum {
    kDLInt = 0,
    kDLUInt = 1,
    kDLFloat = 2,
    kDLOpaqueHandle = 3,
    kDLBfloat = 4,
    kDLComplex = 5,
    kDLBool = 6
} DLDataTypeCode;

typedef struct {
    uint8_t code;    /* DLDataTypeCode */
    uint8_t bits;
    uint16_t lanes;
} DLDataType;

typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides;        /* in elements; NULL: C-contiguous */
    uint64_t byte_offset;
} DLTensor;

/* Legacy (before DLPack 1.0): capsule "dltensor", "used_dltensor" once
 * consumed. */
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

/* DLPack 1.x: capsule "dltensor_versioned", "used_dltensor_versioned"
 * once consumed. */
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

#endif
