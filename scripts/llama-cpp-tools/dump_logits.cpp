// Teacher-forced logits of llama.cpp, for this project's architecture goldens
// (tests/arch_goldens.rs). Only llama.h's public API.
//
//   dump_logits MODEL TEXT_FILE [--n-tokens N] [--fa 0|1] [-t N] [--ctk TYPE]
//               [--positions P,P,...] [--full]
//
// Tokenizes the text (with BOS, as llama-completion does), keeps the first N tokens
// (64), decodes them as one batch at positions 0..N-1 in sequence 0 with every logit
// requested, and prints one JSON object:
//   {"flash_attn", "type_k", "n_vocab", "n_threads", "tokens": [...],
//    "fnv64": FNV-1a 64 of every logit's f32 bits (little-endian, row by row),
//    "positions": [...], "rows": [base64 of the f32 little-endian logits of each
//    sampled position], "logits": [[...], ...] (only with --full)}
#include "llama.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static void quiet(ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR) {
        fputs(text, stderr);
    }
}

static std::string base64(const unsigned char * p, size_t n) {
    static const char * abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = p[i] << 16;
        if (i + 1 < n) v |= p[i + 1] << 8;
        if (i + 2 < n) v |= p[i + 2];
        out += abc[(v >> 18) & 63];
        out += abc[(v >> 12) & 63];
        out += i + 1 < n ? abc[(v >> 6) & 63] : '=';
        out += i + 2 < n ? abc[v & 63] : '=';
    }
    return out;
}

static ggml_type type_named(const std::string & s) {
    if (s == "f32") return GGML_TYPE_F32;
    if (s == "f16") return GGML_TYPE_F16;
    if (s == "bf16") return GGML_TYPE_BF16;
    if (s == "q8_0") return GGML_TYPE_Q8_0;
    if (s == "q4_0") return GGML_TYPE_Q4_0;
    fprintf(stderr, "unknown cache type %s\n", s.c_str());
    exit(1);
}

int main(int argc, char ** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL TEXT_FILE [--n-tokens N] [--fa 0|1] [-t N] [--ctk TYPE] [--positions P,...] [--full]\n", argv[0]);
        return 1;
    }
    const char * model_path = argv[1];
    const char * text_path = argv[2];
    int n_tokens = 64, fa = 0, n_threads = 2;
    bool full = false;
    std::string ctk = "f16", positions_arg;
    for (int i = 3; i < argc; i++) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) { fprintf(stderr, "%s needs a value\n", a.c_str()); exit(1); }
            return argv[++i];
        };
        if (a == "--n-tokens") n_tokens = atoi(next().c_str());
        else if (a == "--fa") fa = atoi(next().c_str());
        else if (a == "-t") n_threads = atoi(next().c_str());
        else if (a == "--ctk") ctk = next();
        else if (a == "--positions") positions_arg = next();
        else if (a == "--full") full = true;
        else { fprintf(stderr, "unknown argument %s\n", a.c_str()); return 1; }
    }

    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    llama_model * model = llama_model_load_from_file(model_path, mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", model_path); return 1; }
    const llama_vocab * vocab = llama_model_get_vocab(model);

    std::ifstream f(text_path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string text = ss.str();
    std::vector<llama_token> toks(text.size() + 16);
    int n = llama_tokenize(vocab, text.c_str(), (int32_t) text.size(), toks.data(), (int32_t) toks.size(), true, false);
    if (n < 0) { fprintf(stderr, "tokenize failed\n"); return 1; }
    toks.resize(std::min(n, n_tokens));
    n_tokens = (int) toks.size();

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 0;
    cp.n_batch = std::max(n_tokens, 512);
    cp.n_ubatch = cp.n_batch;
    cp.n_threads = n_threads;
    cp.n_threads_batch = n_threads;
    cp.flash_attn_type = fa ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = type_named(ctk);
    cp.type_v = fa ? type_named(ctk) : GGML_TYPE_F16;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "cannot make a context\n"); return 1; }

    llama_batch batch = llama_batch_init(n_tokens, 0, 1);
    for (int i = 0; i < n_tokens; i++) {
        batch.token[i] = toks[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = n_tokens;
    if (llama_decode(ctx, batch) != 0) { fprintf(stderr, "decode failed\n"); return 1; }

    const int n_vocab = llama_vocab_n_tokens(vocab);
    std::vector<int> positions;
    if (positions_arg.empty()) {
        positions = {0, n_tokens - 1};
    } else {
        std::stringstream ps(positions_arg);
        std::string p;
        while (std::getline(ps, p, ',')) positions.push_back(atoi(p.c_str()));
    }

    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < n_tokens; i++) {
        const unsigned char * b = (const unsigned char *) llama_get_logits_ith(ctx, i);
        for (size_t k = 0; k < (size_t) n_vocab * sizeof(float); k++) {
            h = (h ^ b[k]) * 0x100000001b3ULL;
        }
    }

    printf("{\"flash_attn\":%d,\"type_k\":\"%s\",\"n_vocab\":%d,\"n_threads\":%d,\"tokens\":[", fa, ctk.c_str(), n_vocab, n_threads);
    for (int i = 0; i < n_tokens; i++) printf("%s%d", i ? "," : "", toks[i]);
    printf("],\"fnv64\":\"%016llx\",\"positions\":[", (unsigned long long) h);
    for (size_t i = 0; i < positions.size(); i++) printf("%s%d", i ? "," : "", positions[i]);
    printf("],\"rows\":[");
    for (size_t i = 0; i < positions.size(); i++) {
        const float * row = llama_get_logits_ith(ctx, positions[i]);
        printf("%s\"%s\"", i ? "," : "", base64((const unsigned char *) row, (size_t) n_vocab * sizeof(float)).c_str());
    }
    printf("]");
    if (full) {
        printf(",\"logits\":[");
        for (int i = 0; i < n_tokens; i++) {
            const float * row = llama_get_logits_ith(ctx, i);
            printf("%s[", i ? "," : "");
            for (int k = 0; k < n_vocab; k++) printf("%s%.9g", k ? "," : "", row[k]);
            printf("]");
        }
        printf("]");
    }
    printf("}\n");

    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
