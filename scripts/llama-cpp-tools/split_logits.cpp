// The last token's logits of a prompt decoded in the given split into batches, by
// llama.cpp, for this project's goldens (tests/real_model.rs, tests/attention_shapes.rs).
// Only llama.h's public API.
//
//   split_logits MODEL TOKENS_FILE SPLIT [--fa 0|1] [--ub N] [-t N] [--n-ctx N]
//                [--ctk TYPE] [--ctv TYPE]
//
// TOKENS_FILE holds token ids separated by white space; SPLIT is the batch sizes,
// comma-separated, summing to the number of tokens (as llama_decode calls, each cut
// into micro-batches of --ub tokens). Only the prompt's last token asks for logits,
// as llama-completion and llama-server ask. Prints one JSON object:
//   {"split", "n_ubatch", "flash_attn", "n_threads", "type_k", "type_v", "n_vocab",
//    "fnv64": FNV-1a 64 of
//    the last token's logits' f32 bits (little-endian), "head": its first 8 values}
#include "llama.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

static ggml_type type_named(const std::string & s) {
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const char * n = ggml_type_name((ggml_type) t);
        if (n && s == n) return (ggml_type) t;
    }
    fprintf(stderr, "unknown cache type %s\n", s.c_str());
    exit(1);
}

static void quiet(ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR) {
        fputs(text, stderr);
    }
}

int main(int argc, char ** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s MODEL TOKENS_FILE SPLIT [--fa 0|1] [--ub N] [-t N] [--n-ctx N] [--ctk TYPE] [--ctv TYPE]\n", argv[0]);
        return 1;
    }
    int fa = 1, n_ubatch = 512, n_threads = 2, n_ctx = 4096;
    std::string ctk = "f16", ctv = "f16";
    for (int i = 4; i < argc; i++) {
        std::string a = argv[i];
        if (i + 1 >= argc) { fprintf(stderr, "%s needs a value\n", a.c_str()); return 1; }
        std::string value = argv[++i];
        int v = atoi(value.c_str());
        if (a == "--ctk") ctk = value;
        else if (a == "--ctv") ctv = value;
        else if (a == "--fa") fa = v;
        else if (a == "--ub") n_ubatch = v;
        else if (a == "-t") n_threads = v;
        else if (a == "--n-ctx") n_ctx = v;
        else { fprintf(stderr, "unknown argument %s\n", a.c_str()); return 1; }
    }
    std::vector<llama_token> toks;
    {
        std::ifstream f(argv[2]);
        long t;
        while (f >> t) toks.push_back((llama_token) t);
    }
    std::vector<int> split;
    for (const char * p = argv[3]; *p; ) {
        split.push_back(atoi(p));
        while (*p && *p != ',') p++;
        if (*p == ',') p++;
    }
    long total = 0;
    for (int s : split) total += s;
    if (total != (long) toks.size()) {
        fprintf(stderr, "split sums to %ld, the prompt has %zu tokens\n", total, toks.size());
        return 1;
    }

    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model * model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = 2048;
    cp.n_ubatch = n_ubatch;
    cp.n_threads = n_threads;
    cp.n_threads_batch = n_threads;
    cp.swa_full = false;
    cp.flash_attn_type = fa ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = type_named(ctk);
    cp.type_v = type_named(ctv);
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "cannot make a context\n"); return 1; }

    int pos = 0;
    for (int s : split) {
        llama_batch batch = llama_batch_init(s, 0, 1);
        for (int i = 0; i < s; i++) {
            batch.token[i] = toks[pos + i];
            batch.pos[i] = pos + i;
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = pos + i == (int) toks.size() - 1;
        }
        batch.n_tokens = s;
        if (llama_decode(ctx, batch) != 0) { fprintf(stderr, "decode failed\n"); return 1; }
        llama_batch_free(batch);
        pos += s;
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    const float * row = llama_get_logits_ith(ctx, -1);
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n_vocab; i++) {
        uint32_t bits;
        memcpy(&bits, &row[i], 4);
        for (int b = 0; b < 4; b++) {
            h ^= (bits >> (8 * b)) & 0xff;
            h *= 0x100000001b3ull;
        }
    }
    printf("{\"split\": [");
    for (size_t i = 0; i < split.size(); i++) printf("%s%d", i ? ", " : "", split[i]);
    printf("], \"n_ubatch\": %d, \"flash_attn\": %d, \"n_threads\": %d, \"type_k\": \"%s\", \"type_v\": \"%s\", \"n_vocab\": %d, \"fnv64\": \"%016llx\", \"head\": [",
           n_ubatch, fa, n_threads, ctk.c_str(), ctv.c_str(), n_vocab, (unsigned long long) h);
    for (int i = 0; i < 8; i++) printf("%s%.9g", i ? ", " : "", row[i]);
    printf("]}\n");
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
