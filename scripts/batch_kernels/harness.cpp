// mul_mat through llama.cpp's own CPU backend, for tests/data/batch_kernels.json.
//
// Build against a llama.cpp tree built with the golden outputs' flags (see
// ../shared/golden/README.md), L being that tree:
//   g++ -O2 -std=c++17 harness.cpp -I$L/ggml/include $(find $L/build -name libggml-cpu.a) \
//       $(find $L/build -name libggml-base.a) $(find $L/build -name libggml.a) \
//       -lm -fopenmp -lpthread -o harness
// Run: harness TYPE K M N REPACK THREADS PREFIX SEED. The weights ([K, M], quantized by
// ggml_quantize_chunk) and the F32 activations ([K, N]) are drawn, weights first, from
// the xorshift stream of tests/common::xorshift_data; the weights go to the CPU_REPACK
// buffer when REPACK is 1, else to the plain CPU buffer. Writes PREFIX.w (weight
// bytes), PREFIX.x (activations) and PREFIX.y (the [N][M] f32 outputs).
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

ggml_backend_buffer_type_t ggml_backend_cpu_repack_buffer_type(void);

static uint64_t s;

static float rnd() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    float v = 0;
    for (int k = 0; k < 4; k++) {
        v += ((s >> (16 * k)) & 0xffff) / 65536.0f;
    }
    return v - 2.0f;
}

static void put(const char * prefix, const char * ext, const void * p, size_t n) {
    char fn[512];
    snprintf(fn, sizeof fn, "%s.%s", prefix, ext);
    FILE * f = fopen(fn, "wb");
    fwrite(p, 1, n, f);
    fclose(f);
}

int main(int argc, char ** argv) {
    if (argc != 9) {
        fprintf(stderr, "usage: harness TYPE K M N REPACK THREADS PREFIX SEED\n");
        return 1;
    }
    int K = atoi(argv[2]), M = atoi(argv[3]), N = atoi(argv[4]), repack = atoi(argv[5]), nth = atoi(argv[6]);
    const char * prefix = argv[7];
    s = strtoull(argv[8], 0, 10) * 0x9e3779b97f4a7c15ULL | 1;
    ggml_type t = GGML_TYPE_COUNT;
    for (int i = 0; i < GGML_TYPE_COUNT; i++) {
        const char * n = ggml_type_name((ggml_type) i);
        if (n && !strcmp(n, argv[1])) {
            t = (ggml_type) i;
        }
    }
    if (t == GGML_TYPE_COUNT) {
        fprintf(stderr, "unknown type %s\n", argv[1]);
        return 1;
    }
    std::vector<float> w(K * M), x(K * N);
    for (auto & v : w) v = rnd();
    for (auto & v : x) v = rnd();
    std::vector<uint8_t> wq(ggml_row_size(t, K) * M);
    ggml_quantize_chunk(t, w.data(), wq.data(), 0, M, K, nullptr);

    ggml_init_params ip = { 16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true };
    ggml_context * cw = ggml_init(ip);
    ggml_context * cx = ggml_init(ip);
    ggml_tensor * a = ggml_new_tensor_2d(cw, t, K, M);
    ggml_tensor * b = ggml_new_tensor_2d(cx, GGML_TYPE_F32, K, N);
    ggml_tensor * c = ggml_mul_mat(cx, a, b);
    ggml_backend_buffer_type_t bt = repack ? ggml_backend_cpu_repack_buffer_type() : ggml_backend_cpu_buffer_type();
    ggml_backend_alloc_ctx_tensors_from_buft(cw, bt);
    ggml_backend_alloc_ctx_tensors_from_buft(cx, ggml_backend_cpu_buffer_type());
    ggml_backend_tensor_set(a, wq.data(), 0, wq.size());
    ggml_backend_tensor_set(b, x.data(), 0, x.size() * 4);
    ggml_cgraph * g = ggml_new_graph(cx);
    ggml_build_forward_expand(g, c);
    ggml_backend_t be = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(be, nth);
    ggml_backend_graph_compute(be, g);
    std::vector<float> y(M * N);
    ggml_backend_tensor_get(c, y.data(), 0, y.size() * 4);
    put(prefix, "w", wq.data(), wq.size());
    put(prefix, "x", x.data(), x.size() * 4);
    put(prefix, "y", y.data(), y.size() * 4);
    return 0;
}
