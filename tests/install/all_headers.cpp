// Every installed header in one C++ translation unit, compiled with
//   g++ -std=c++17 -Wall -Wextra -pedantic -Werror
// (the CUDA and NCCL headers only where the tree has them: -DDTR_TEST_CUDA), and linked
// against the installed library, so that a C++ framework can use dtr as it is installed.
#include <dtr/dtr.h>
#include <dtr/dtr_core.h>
#include <dtr/dtr_mpi.h>
#ifdef DTR_TEST_CUDA
#include <dtr/dtr_cuda.h>
#include <dtr/dtr_nccl.h>
#endif

#include <cstdio>
#include <cstring>

int main() {
    dtr_placement_t p[2];
    int n = 0;
    if (dtr_check_headers() != DTR_OK) {
        std::printf("dtr_check_headers: %s\n", dtr_last_error());
        return 1;
    }
    if (dtr_placements_parse("S(0),R", p, 2, &n) != DTR_OK || n != 2 ||
        p[0].kind != DTR_SHARD || p[1].kind != DTR_REPLICATE) {
        std::printf("dtr_placements_parse: %s\n", dtr_last_error());
        return 1;
    }
    dtr_backend_req_t req;  // the one struct with an alignment specifier
    static_assert(alignof(dtr_backend_req_t) == 16, "dtr_backend_req_t is 16-byte aligned");
    std::memset(&req, 0, sizeof req);
    std::printf("c++: dtr %s, %s\n", dtr_version_string(), dtr_status_name(DTR_ERR_PARSE));
    return 0;
}
