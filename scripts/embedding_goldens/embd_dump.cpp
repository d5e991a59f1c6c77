// embd-dump: embeddings of several prompts as llama.cpp computes them, at full precision.
// Each prompt is tokenized as llama-embedding does (add special tokens, parse special), all of
// them go into ONE batch (prompt k is sequence k, positions from 0, every token an output), and
// the raw (unnormalised) embeddings are printed as JSON: per sequence for pooled types, per
// token for pooling none. Rank pooling prints the classifier's scores.
//
// usage: embd-dump MODEL POOLING(-1 model default|0 none|1 mean|2 cls|3 last|4 rank) FA(0|1) THREADS PROMPT...
// Built by scripts/embedding_goldens/make_goldens.py against llama.cpp's static libraries.
#include "llama.h"
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

static void print_vec(const float * v, int n) {
    printf("[");
    for (int i = 0; i < n; i++) printf(i ? ",%.9g" : "%.9g", v[i]);
    printf("]");
}

int main(int argc, char ** argv) {
    if (argc < 6) { fprintf(stderr, "usage: embd-dump MODEL POOLING FA THREADS PROMPT...\n"); return 1; }
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 2;
    const llama_vocab * vocab = llama_model_get_vocab(model);
    std::vector<std::vector<llama_token>> prompts;
    int total = 0;
    for (int a = 5; a < argc; a++) {
        std::string text = argv[a];
        std::vector<llama_token> toks(text.size() + 8);
        int n = llama_tokenize(vocab, text.c_str(), (int) text.size(), toks.data(), (int) toks.size(), true, true);
        if (n < 0) return 3;
        toks.resize(n);
        total += n;
        prompts.push_back(toks);
    }
    llama_context_params cp = llama_context_default_params();
    cp.embeddings = true;
    cp.pooling_type = (enum llama_pooling_type) atoi(argv[2]);
    cp.n_ctx = total > 512 ? total : 512;
    cp.n_batch = cp.n_ctx;
    cp.n_ubatch = cp.n_ctx;
    cp.n_seq_max = (uint32_t) prompts.size();
    cp.kv_unified = true;
    cp.n_threads = cp.n_threads_batch = atoi(argv[4]);
    cp.flash_attn_type = atoi(argv[3]) ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) return 4;
    llama_batch b = llama_batch_init(total, 0, 1);
    for (size_t s = 0; s < prompts.size(); s++) {
        for (size_t i = 0; i < prompts[s].size(); i++) {
            int k = b.n_tokens++;
            b.token[k] = prompts[s][i]; b.pos[k] = (llama_pos) i; b.n_seq_id[k] = 1; b.seq_id[k][0] = (llama_seq_id) s; b.logits[k] = 1;
        }
    }
    if (llama_decode(ctx, b) != 0) return 5;
    const enum llama_pooling_type pt = llama_pooling_type(ctx);
    const int n_embd = llama_model_n_embd(model);
    const int width = pt == LLAMA_POOLING_TYPE_RANK ? (int) llama_model_n_cls_out(model) : n_embd;
    printf("{\"pooling\":%d,\"n_embd\":%d,\"tokens\":[", (int) pt, n_embd);
    for (size_t s = 0; s < prompts.size(); s++) {
        printf(s ? ",[" : "[");
        for (size_t i = 0; i < prompts[s].size(); i++) printf(i ? ",%d" : "%d", prompts[s][i]);
        printf("]");
    }
    printf("],\"embeddings\":[");
    if (pt == LLAMA_POOLING_TYPE_NONE) {
        for (int k = 0; k < total; k++) { if (k) printf(","); print_vec(llama_get_embeddings_ith(ctx, k), n_embd); }
    } else {
        for (size_t s = 0; s < prompts.size(); s++) { if (s) printf(","); print_vec(llama_get_embeddings_seq(ctx, (llama_seq_id) s), width); }
    }
    printf("]}\n");
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
