/* Internals of dtensor/ that other modules use. */
#ifndef DTR_DTENSOR_INTERNAL_H
#define DTR_DTENSOR_INTERNAL_H

#include <stdint.h>

#include "dtensor/dtensor.h"

/* FNV-1a over the mesh's sizes and rank list: equal meshes hash equal. */
uint64_t dtr__mesh_hash(const dtr_mesh_t *mesh);

#endif
