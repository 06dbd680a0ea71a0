// Reference for `reverie bench export`: llama.cpp's own quantizer
// (llama_model_quantize, the code behind llama-quantize) from the static
// libraries Reverie links. Re-quantizes MODEL to q8_0 at OUT; prints seconds.
#include "llama.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

int main(int argc, char ** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s MODEL OUT THREADS\n", argv[0]);
        return 2;
    }
    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    llama_backend_init();
    llama_model_quantize_params p = llama_model_quantize_default_params();
    p.ftype = LLAMA_FTYPE_MOSTLY_Q8_0;
    p.nthread = std::atoi(argv[3]);
    p.allow_requantize = true;
    auto t0 = std::chrono::steady_clock::now();
    uint32_t rc = llama_model_quantize(argv[1], argv[2], &p);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("{\"seconds\": %.4f, \"rc\": %u}\n", s, rc);
    llama_backend_free();
    return rc == 0 ? 0 : 1;
}
