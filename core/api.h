/* Export control and shared limits for every public dtr header. */
#ifndef DTR_CORE_API_H
#define DTR_CORE_API_H

#if defined(__GNUC__)
#define DTR_API __attribute__((visibility("default")))
#else
#define DTR_API
#endif

/* Most mesh dims and most tensor dims a spec may have. */
#define DTR_MAX_MESH_DIMS 8
#define DTR_MAX_TENSOR_DIMS 8

#endif
