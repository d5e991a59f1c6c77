// The mixture-of-experts ops through llama.cpp's own CPU backend, for
// tests/data/moe_ops.json: mul_mat_id (experts in the CPU_REPACK buffer or the plain
// one), argsort and top_k on rows full of equal values, gelu and geglu.
//
// Build against a llama.cpp tree built with the golden outputs' flags (see
// ../shared/golden/README.md), L being that tree:
//   g++ -O2 -std=c++17 harness.cpp -I$L/ggml/include $(find $L/build -name libggml-cpu.a) \
//       $(find $L/build -name libggml-base.a) $(find $L/build -name libggml.a) \
//       -lm -fopenmp -lpthread -o harness
// Run: harness > tests/data/moe_ops.json. Every input is drawn from the xorshift
// stream of tests/common::xorshift_data with the seed the case names, so the tests
// rebuild the inputs; outputs are f32 bits in hex (mul_mat_id, gelu) or indices.
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

ggml_backend_buffer_type_t ggml_backend_cpu_repack_buffer_type(void);

static uint64_t s;

static void seed(uint64_t v) { s = v * 0x9e3779b97f4a7c15ULL | 1; }

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

static ggml_type type_of(const char * name) {
    for (int i = 0; i < GGML_TYPE_COUNT; i++) {
        const char * n = ggml_type_name((ggml_type) i);
        if (n && !strcmp(n, name)) {
            return (ggml_type) i;
        }
    }
    fprintf(stderr, "unknown type %s\n", name);
    exit(1);
}

// Builds a graph with `build` (a context for the weights, one for the rest; it returns
// the output), places the weight context in `wbuft`, calls `fill` to set the inputs,
// computes with 2 threads and returns the output's bytes.
static std::vector<uint8_t> run(ggml_backend_buffer_type_t wbuft,
                                const std::function<ggml_tensor *(ggml_context *, ggml_context *)> & build,
                                const std::function<void()> & fill) {
    ggml_init_params ip = { 64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true };
    ggml_context * cw = ggml_init(ip);
    ggml_context * cx = ggml_init(ip);
    ggml_tensor * out = build(cw, cx);
    ggml_backend_buffer_t bw = ggml_backend_alloc_ctx_tensors_from_buft(cw, wbuft);
    ggml_backend_buffer_t bx = ggml_backend_alloc_ctx_tensors_from_buft(cx, ggml_backend_cpu_buffer_type());
    fill();
    ggml_cgraph * g = ggml_new_graph(cx);
    ggml_build_forward_expand(g, out);
    ggml_backend_t be = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(be, 2);
    ggml_backend_graph_compute(be, g);
    std::vector<uint8_t> y(ggml_nbytes(out));
    ggml_backend_tensor_get(out, y.data(), 0, y.size());
    ggml_backend_free(be);
    if (bw) ggml_backend_buffer_free(bw);
    ggml_backend_buffer_free(bx);
    ggml_free(cw);
    ggml_free(cx);
    return y;
}

static std::string hex_f32(const std::vector<uint8_t> & y) {
    std::string o = "[";
    for (size_t i = 0; i < y.size() / 4; i++) {
        uint32_t v;
        memcpy(&v, &y[4 * i], 4);
        char b[16];
        snprintf(b, sizeof b, "%s\"%08x\"", i ? ", " : "", v);
        o += b;
    }
    return o + "]";
}

static std::string ints(const std::vector<uint8_t> & y) {
    std::string o = "[";
    for (size_t i = 0; i < y.size() / 4; i++) {
        int32_t v;
        memcpy(&v, &y[4 * i], 4);
        o += (i ? ", " : "") + std::to_string(v);
    }
    return o + "]";
}

// The expert of slot i of token t: expert 0 for slot 0 (so it gets every token, 8 or
// more rows in the larger cases), the others spread over experts 1 .. E-2 (E-1 gets
// none).
static int32_t expert_of(int i, int t, int E) {
    return i == 0 ? 0 : 1 + (t * 5 + i * 3) % (E > 2 ? E - 2 : 1);
}

static void mul_mat_id_case(const char * tname, int K, int M, int E, int U, int NB, int T, bool repack, uint64_t sd, bool last) {
    ggml_type t = type_of(tname);
    seed(sd);
    std::vector<float> w((size_t) K * M * E), x((size_t) K * NB * T);
    for (auto & v : w) v = rnd();
    for (auto & v : x) v = rnd();
    std::vector<uint8_t> wq(ggml_row_size(t, K) * M * E);
    ggml_quantize_chunk(t, w.data(), wq.data(), 0, (int64_t) M * E, K, nullptr);
    std::vector<int32_t> ids((size_t) U * T);
    for (int tok = 0; tok < T; tok++) {
        for (int i = 0; i < U; i++) {
            ids[tok * U + i] = expert_of(i, tok, E);
        }
    }
    ggml_tensor *a, *b, *id;
    auto y = run(
        repack ? ggml_backend_cpu_repack_buffer_type() : ggml_backend_cpu_buffer_type(),
        [&](ggml_context * cw, ggml_context * cx) {
            a = ggml_new_tensor_3d(cw, t, K, M, E);
            b = ggml_new_tensor_3d(cx, GGML_TYPE_F32, K, NB, T);
            id = ggml_new_tensor_2d(cx, GGML_TYPE_I32, U, T);
            return ggml_mul_mat_id(cx, a, b, id);
        },
        [&]() {
            ggml_backend_tensor_set(a, wq.data(), 0, wq.size());
            ggml_backend_tensor_set(b, x.data(), 0, x.size() * 4);
            ggml_backend_tensor_set(id, ids.data(), 0, ids.size() * 4);
        });
    printf("{\"type\": \"%s\", \"k\": %d, \"m\": %d, \"n_expert\": %d, \"n_used\": %d, \"n_b\": %d, "
           "\"n_tokens\": %d, \"repack\": %s, \"seed\": %llu, \"y\": %s}%s\n",
           tname, K, M, E, U, NB, T, repack ? "true" : "false", (unsigned long long) sd, hex_f32(y).c_str(),
           last ? "" : ",");
}

static void sort_case(int n, int rows, float spread, uint64_t sd, bool last) {
    seed(sd);
    std::vector<float> x((size_t) n * rows);
    for (auto & v : x) v = roundf(rnd() * spread);
    auto op = [&](const std::function<ggml_tensor *(ggml_context *, ggml_tensor *)> & f) {
        ggml_tensor * a;
        return run(
            ggml_backend_cpu_buffer_type(),
            [&](ggml_context *, ggml_context * cx) {
                a = ggml_new_tensor_2d(cx, GGML_TYPE_F32, n, rows);
                return f(cx, a);
            },
            [&]() { ggml_backend_tensor_set(a, x.data(), 0, x.size() * 4); });
    };
    auto asc = op([](ggml_context * c, ggml_tensor * a) { return ggml_argsort(c, a, GGML_SORT_ORDER_ASC); });
    auto desc = op([](ggml_context * c, ggml_tensor * a) { return ggml_argsort(c, a, GGML_SORT_ORDER_DESC); });
    printf("{\"n\": %d, \"rows\": %d, \"spread\": %g, \"seed\": %llu, \"asc\": %s, \"desc\": %s, \"top_k\": [",
           n, rows, spread, (unsigned long long) sd, ints(asc).c_str(), ints(desc).c_str());
    std::vector<int> ks;
    for (int k : { 1, 2, 8, n }) {
        if (k <= n && (ks.empty() || ks.back() < k)) ks.push_back(k);
    }
    bool first = true;
    for (int k : ks) {
        auto top = op([k](ggml_context * c, ggml_tensor * a) { return ggml_top_k(c, a, k); });
        printf("%s{\"k\": %d, \"y\": %s}", first ? "" : ", ", k, ints(top).c_str());
        first = false;
    }
    printf("]}%s\n", last ? "" : ",");
}

static void gelu_case(ggml_type t, int n, uint64_t sd, bool last) {
    seed(sd);
    std::vector<float> x(n), g(n);
    for (auto & v : x) v = rnd() * 7.0f;
    for (auto & v : g) v = rnd();
    std::vector<uint8_t> xt(ggml_row_size(t, n)), gt(ggml_row_size(t, n));
    ggml_quantize_chunk(t, x.data(), xt.data(), 0, 1, n, nullptr);
    ggml_quantize_chunk(t, g.data(), gt.data(), 0, 1, n, nullptr);
    ggml_tensor *a, *b;
    auto fill = [&]() {
        ggml_backend_tensor_set(a, xt.data(), 0, xt.size());
        ggml_backend_tensor_set(b, gt.data(), 0, gt.size());
    };
    auto cast = [&](ggml_context * cx, ggml_tensor * r) {
        return r->type == GGML_TYPE_F32 ? r : ggml_cast(cx, r, GGML_TYPE_F32);
    };
    auto gelu = run(
        ggml_backend_cpu_buffer_type(),
        [&](ggml_context *, ggml_context * cx) {
            a = ggml_new_tensor_1d(cx, t, n);
            b = ggml_new_tensor_1d(cx, t, n);
            return cast(cx, ggml_gelu(cx, a));
        },
        fill);
    auto geglu = run(
        ggml_backend_cpu_buffer_type(),
        [&](ggml_context *, ggml_context * cx) {
            a = ggml_new_tensor_1d(cx, t, n);
            b = ggml_new_tensor_1d(cx, t, n);
            return cast(cx, ggml_geglu_split(cx, a, b));
        },
        fill);
    auto th = run(
        ggml_backend_cpu_buffer_type(),
        [&](ggml_context *, ggml_context * cx) {
            a = ggml_new_tensor_1d(cx, t, n);
            b = ggml_new_tensor_1d(cx, t, n);
            return cast(cx, ggml_tanh(cx, a));
        },
        fill);
    printf("{\"type\": \"%s\", \"n\": %d, \"seed\": %llu, \"gelu\": %s, \"geglu\": %s, \"tanh\": %s}%s\n",
           ggml_type_name(t), n, (unsigned long long) sd, hex_f32(gelu).c_str(), hex_f32(geglu).c_str(),
           hex_f32(th).c_str(), last ? "" : ",");
}

int main() {
    ggml_cpu_init();
    printf("{\n\"about\": \"llama.cpp 0c1e570 (the golden outputs' build: AVX-512 VNNI, no AMX), 2 threads, "
           "made by scripts/moe_ops/harness.cpp; inputs from tests/common xorshift_data with the case's seed: "
           "mul_mat_id: experts [k, m, n_expert] (ggml_quantize_chunk) then activations [k, n_b, n_tokens]; ids "
           "as expert_of in the harness; repack: experts in the CPU_REPACK buffer; y: the f32 bits of "
           "[m, n_used, n_tokens]. sort: roundf(x * spread) for [n, rows]; argsort asc/desc and top_k rows. "
           "gelu: x * 7 then gate values, stored as the type; outputs as f32 bits\",\n");
    printf("\"mul_mat_id\": [\n");
    struct C { const char * t; int K, M, E, U, NB, T; bool repack; };
    std::vector<C> cs = {
        { "q4_0", 512, 16, 4, 2, 2, 9, true },
        { "iq4_nl", 256, 8, 4, 2, 2, 9, true },
        { "q4_K", 512, 8, 4, 2, 2, 9, true },
        { "q2_K", 256, 8, 4, 2, 2, 9, true },
        { "q4_K", 512, 16, 4, 2, 1, 1, true },
        { "q2_K", 256, 8, 4, 3, 3, 8, false },
        { "q3_K", 256, 8, 4, 3, 3, 8, false },
        { "q4_K", 512, 12, 4, 3, 3, 8, false },
        { "q5_K", 256, 8, 4, 3, 3, 8, false },
        { "q6_K", 256, 8, 4, 3, 3, 8, false },
        { "iq4_xs", 256, 8, 4, 3, 3, 8, false },
        { "q4_0", 256, 13, 5, 3, 1, 4, false },
        { "q8_0", 512, 13, 5, 3, 3, 4, false },
        { "q5_1", 256, 7, 5, 3, 3, 4, false },
        { "f16", 96, 7, 3, 2, 2, 5, false },
        { "q8_0", 256, 16, 4, 2, 1, 1, false },
    };
    for (size_t i = 0; i < cs.size(); i++) {
        const C & c = cs[i];
        mul_mat_id_case(c.t, c.K, c.M, c.E, c.U, c.NB, c.T, c.repack, 400 + i, i + 1 == cs.size());
    }
    printf("],\n\"sort\": [\n");
    int ns[] = { 1, 2, 5, 16, 17, 40, 128 };
    float spreads[] = { 0.5f, 2.0f };
    int k = 0;
    for (int n : ns) {
        for (float sp : spreads) {
            sort_case(n, 3, sp, 500 + k, n == 128 && sp == 2.0f);
            k++;
        }
    }
    printf("],\n\"gelu\": [\n");
    gelu_case(GGML_TYPE_F32, 256, 600, false);
    gelu_case(GGML_TYPE_F16, 256, 601, false);
    gelu_case(GGML_TYPE_BF16, 256, 602, true);
    printf("]\n}\n");
    return 0;
}
