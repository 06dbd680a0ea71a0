// Reference for `reverie bench decode`: llama.cpp's own C API, linked from
// the very static libraries Reverie links, timing prompt processing and
// token-by-token decoding the way llama-bench does (random tokens, empty
// cache per run, no sampling). Prints one JSON object.
#include "llama.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

static double now_s() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char ** argv) {
    if (argc != 6) {
        std::fprintf(stderr, "usage: %s MODEL PROMPT_TOKENS GEN_TOKENS THREADS REPS\n", argv[0]);
        return 2;
    }
    const char * path = argv[1];
    const int pp = std::atoi(argv[2]), tg = std::atoi(argv[3]), threads = std::atoi(argv[4]), reps = std::atoi(argv[5]);
    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(path, mp);
    if (!model) {
        std::fprintf(stderr, "cannot load %s\n", path);
        return 1;
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = pp + tg + 16;
    cp.n_batch = std::max(pp, 32);
    cp.n_ubatch = std::min(std::max(pp, 32), 512);
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    llama_context * ctx = llama_init_from_model(model, cp);
    std::vector<llama_token> tokens(pp);
    for (int i = 0; i < pp; i++) tokens[i] = 5 + (i * 7919) % (n_vocab - 10);
    llama_memory_t mem = llama_get_memory(ctx);

    // warm-up
    llama_decode(ctx, llama_batch_get_one(tokens.data(), std::min(pp, 32)));
    llama_synchronize(ctx);

    double pp_sum = 0, tg_sum = 0;
    for (int r = 0; r < reps; r++) {
        llama_memory_clear(mem, true);
        double t0 = now_s();
        for (int i = 0; i < pp; i += cp.n_batch) {
            int n = std::min((int) cp.n_batch, pp - i);
            llama_decode(ctx, llama_batch_get_one(tokens.data() + i, n));
        }
        llama_synchronize(ctx);
        pp_sum += pp / (now_s() - t0);

        llama_memory_clear(mem, true);
        llama_token tok = tokens[r % pp];
        t0 = now_s();
        for (int i = 0; i < tg; i++) {
            llama_decode(ctx, llama_batch_get_one(&tok, 1));
            llama_synchronize(ctx);
            tok = 5 + (tok * 31 + i) % (n_vocab - 10);
        }
        tg_sum += tg / (now_s() - t0);
    }
    std::printf("{\"prompt_tokens_per_s\": %.3f, \"decode_tokens_per_s\": %.3f}\n", pp_sum / reps, tg_sum / reps);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
