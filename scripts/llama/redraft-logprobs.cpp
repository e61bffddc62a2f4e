// redraft-logprobs: llama.cpp's next-token log-probabilities for every position of a token
// sequence, as JSON lines, so redraft's model code can be checked against llama.cpp on the same
// GGUF (issue 16); with --text, llama.cpp's tokenizer as an oracle instead.
//
//   redraft-logprobs -m MODEL.gguf (--tokens FILE | --text FILE) [-t THREADS] [--top K] [-v]
//
// --tokens FILE: a JSON array of token ids, or ids separated by whitespace. The whole sequence is
// evaluated in one llama_decode batch (causal, as the model is; flash attention off) with logits
// for every position; stdout gets one line per position i:
//
//   {"pos":i,"next":ID|null,"next_logprob":X|null,"top":[[id,logprob],...]}
//
// where logprobs are log_softmax over the whole vocabulary, computed in double precision,
// `next` is tokens[i+1] (null at the last position) and `top` holds the K (default 5) most
// likely ids, most likely first (ties: lower id first). A non-finite logprob is written as null.
// llama.cpp keeps every position's logits: n_tokens x n_vocab floats (1,100 tokens of a 151,936-id
// vocabulary: 670 MB).
//
// --text FILE: the file tokenized with the model's vocabulary, no BOS/EOS added and special
// tokens not parsed (their text is plain text), written as one JSON array on stdout.
//
// Timings go to stderr; llama.cpp's own log too, but only its errors unless -v. Any error
// exits 1 with a message saying what was wrong.
//
// Built by scripts/setup-llama-server against the llama.cpp tree of its llama-server.

#include "llama.h"

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <clocale>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

bool g_verbose = false;

[[noreturn]] void fail(const std::string & msg) {
    fprintf(stderr, "redraft-logprobs: %s\n", msg.c_str());
    exit(1);
}

const char * const USAGE =
    "usage: redraft-logprobs -m MODEL.gguf (--tokens FILE | --text FILE) [-t THREADS] [--top K] [-v]";

[[noreturn]] void usage_fail(const std::string & msg) {
    fail(msg + "\n" + USAGE);
}

void log_callback(enum ggml_log_level level, const char * text, void *) {
    static bool last_shown = false;
    // GGML_LOG_LEVEL_CONT continues the previous message: shown when that one was.
    const bool show = g_verbose || level == GGML_LOG_LEVEL_ERROR ||
                      (level == GGML_LOG_LEVEL_CONT && last_shown);
    if (level != GGML_LOG_LEVEL_CONT) {
        last_shown = show;
    }
    if (show) {
        fputs(text, stderr);
    }
}

std::string read_file(const std::string & path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        fail("cannot read " + path + ": " + strerror(errno));
    }
    std::ostringstream buf;
    buf << in.rdbuf();
    if (in.bad()) {
        fail("cannot read " + path);
    }
    return buf.str();
}

long parse_int(const std::string & arg, const char * what, long min) {
    char * end = nullptr;
    errno = 0;
    const long v = strtol(arg.c_str(), &end, 10);
    if (arg.empty() || *end != '\0' || errno != 0 || v < min || v > INT32_MAX) {
        usage_fail(std::string(what) + " must be an integer >= " + std::to_string(min) + ", not '" + arg + "'");
    }
    return v;
}

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// One token id at text[i...]: decimal digits only (a JSON integer that is a valid id has no sign,
// fraction or exponent). Advances i past it.
llama_token parse_id(const std::string & text, size_t & i, const std::string & path) {
    const size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
        i++;
    }
    const bool bad_end = i < text.size() && !is_space(text[i]) && text[i] != ',' && text[i] != ']';
    if (i == start || bad_end) {
        size_t stop = i;
        while (stop < text.size() && !is_space(text[stop]) && text[stop] != ',' && text[stop] != ']') {
            stop++;
        }
        const std::string word = text.substr(start, std::max(stop - start, size_t(1)));
        fail(path + ": '" + word + "' at byte " + std::to_string(start) +
             " is not a token id (a non-negative integer)");
    }
    const std::string digits = text.substr(start, i - start);
    if (digits.size() > 10 || std::stoll(digits) > INT32_MAX) {
        fail(path + ": token id " + digits + " at byte " + std::to_string(start) + " is out of range");
    }
    return (llama_token) std::stoll(digits);
}

// A JSON array of ids, or ids separated by whitespace.
std::vector<llama_token> parse_tokens(const std::string & text, const std::string & path) {
    std::vector<llama_token> ids;
    size_t i = 0;
    auto skip_space = [&] {
        while (i < text.size() && is_space(text[i])) {
            i++;
        }
    };
    skip_space();
    if (i < text.size() && text[i] == '[') {
        i++;
        skip_space();
        if (i < text.size() && text[i] == ']') {
            i++;
        } else {
            for (;;) {
                skip_space();
                ids.push_back(parse_id(text, i, path));
                skip_space();
                if (i < text.size() && text[i] == ',') {
                    i++;
                    continue;
                }
                if (i < text.size() && text[i] == ']') {
                    i++;
                    break;
                }
                fail(path + ": expected ',' or ']' at byte " + std::to_string(i) + " of the JSON array");
            }
        }
        skip_space();
        if (i != text.size()) {
            fail(path + ": unexpected text after the JSON array at byte " + std::to_string(i));
        }
    } else {
        while (i < text.size()) {
            ids.push_back(parse_id(text, i, path));
            if (i < text.size() && !is_space(text[i])) {
                fail(path + ": ids must be separated by whitespace (or be a JSON array); byte " +
                     std::to_string(i) + " is '" + text[i] + "'");
            }
            skip_space();
        }
    }
    if (ids.empty()) {
        fail(path + ": no token ids");
    }
    return ids;
}

void print_logprob(double v) {
    if (std::isfinite(v)) {
        printf("%.17g", v);
    } else {
        fputs("null", stdout);
    }
}

double ms_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char ** argv) {
    std::setlocale(LC_NUMERIC, "C");

    std::string model_path, tokens_path, text_path;
    int threads = 0;
    long top_k = 5;
    for (int i = 1; i < argc; i++) {
        const std::string arg = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                usage_fail(arg + " needs a value");
            }
            return argv[++i];
        };
        if (arg == "-m" || arg == "--model") {
            model_path = value();
        } else if (arg == "--tokens") {
            tokens_path = value();
        } else if (arg == "--text") {
            text_path = value();
        } else if (arg == "-t" || arg == "--threads") {
            threads = (int) parse_int(value(), "-t", 1);
        } else if (arg == "--top") {
            top_k = parse_int(value(), "--top", 0);
        } else if (arg == "-v" || arg == "--verbose") {
            g_verbose = true;
        } else if (arg == "-h" || arg == "--help") {
            printf("%s\n  --tokens FILE  JSON array (or whitespace-separated) token ids: one JSON line of\n"
                   "                 next-token logprobs per position on stdout\n"
                   "  --text FILE    tokenize FILE (no BOS, special tokens as plain text): one JSON array\n"
                   "  -t THREADS     CPU threads (default: all)\n"
                   "  --top K        most likely ids per position (default 5)\n"
                   "  -v             llama.cpp's whole log on stderr (default: its errors)\n",
                   USAGE);
            return 0;
        } else {
            usage_fail("unknown argument '" + arg + "'");
        }
    }
    if (model_path.empty()) {
        usage_fail("-m MODEL.gguf is required");
    }
    if (tokens_path.empty() == text_path.empty()) {
        usage_fail("give exactly one of --tokens FILE and --text FILE");
    }
    if (threads == 0) {
        threads = (int) std::max(1u, std::thread::hardware_concurrency());
    }

    // Read the input before the model: a wrong path fails in milliseconds, not after a load.
    std::vector<llama_token> tokens;
    std::string text;
    if (!tokens_path.empty()) {
        tokens = parse_tokens(read_file(tokens_path), tokens_path);
    } else {
        text = read_file(text_path);
    }
    {
        std::ifstream probe(model_path, std::ios::binary);
        if (!probe) {
            fail("cannot read model " + model_path + ": " + strerror(errno));
        }
    }

    llama_log_set(log_callback, nullptr);
    llama_backend_init();

    const auto t_load = std::chrono::steady_clock::now();
    llama_model_params mparams = llama_model_default_params();
    mparams.n_gpu_layers = 0;
    mparams.vocab_only = !text_path.empty();
    llama_model * model = llama_model_load_from_file(model_path.c_str(), mparams);
    if (model == nullptr) {
        fail("llama.cpp could not load " + model_path + " (run with -v for its log)");
    }
    const double load_ms = ms_since(t_load);
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);

    if (!text_path.empty()) {
        if (text.size() > (size_t) INT32_MAX) {
            fail(text_path + " is too large to tokenize in one call");
        }
        std::vector<llama_token> ids;
        if (!text.empty()) {
            const int32_t want = llama_tokenize(vocab, text.data(), (int32_t) text.size(), nullptr, 0,
                                                /*add_special=*/false, /*parse_special=*/false);
            if (want == INT32_MIN) {
                fail(text_path + ": too many tokens");
            }
            ids.resize(want < 0 ? -want : want);
            const int32_t n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), ids.data(),
                                             (int32_t) ids.size(), false, false);
            if (n < 0) {
                fail(text_path + ": llama_tokenize failed (" + std::to_string(n) + ")");
            }
            ids.resize(n);
        }
        std::string out = "[";
        for (size_t i = 0; i < ids.size(); i++) {
            if (i) {
                out += ',';
            }
            out += std::to_string(ids[i]);
        }
        out += "]\n";
        fwrite(out.data(), 1, out.size(), stdout);
        fprintf(stderr, "redraft-logprobs: %zu bytes -> %zu tokens (vocab %d, load %.1f ms)\n", text.size(),
                ids.size(), n_vocab, load_ms);
        llama_model_free(model);
        llama_backend_free();
        return fflush(stdout) == 0 ? 0 : 1;
    }

    for (size_t i = 0; i < tokens.size(); i++) {
        if (tokens[i] >= n_vocab) {
            fail(tokens_path + ": token " + std::to_string(i) + " is id " + std::to_string(tokens[i]) +
                 ", not below the model's vocabulary size " + std::to_string(n_vocab));
        }
    }
    if (tokens.size() > (size_t) INT32_MAX / 2) {
        fail(tokens_path + ": too many tokens");
    }
    const int32_t n = (int32_t) tokens.size();
    const int32_t n_ctx_train = llama_model_n_ctx_train(model);
    if (n > n_ctx_train) {
        fprintf(stderr, "redraft-logprobs: warning: %d tokens, more than the model's training context %d\n", n,
                n_ctx_train);
    }

    llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx = (uint32_t) n;
    cparams.n_batch = (uint32_t) n;
    cparams.n_ubatch = (uint32_t) n;
    cparams.n_seq_max = 1;
    cparams.n_threads = threads;
    cparams.n_threads_batch = threads;
    cparams.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cparams.no_perf = true;
    llama_context * ctx = llama_init_from_model(model, cparams);
    if (ctx == nullptr) {
        fail("llama.cpp could not make a context of " + std::to_string(n) + " tokens (run with -v for its log)");
    }

    llama_batch batch = llama_batch_init(n, 0, 1);
    for (int32_t i = 0; i < n; i++) {
        batch.token[i] = tokens[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = n;

    const auto t_decode = std::chrono::steady_clock::now();
    const int32_t rc = llama_decode(ctx, batch);
    const double decode_ms = ms_since(t_decode);
    if (rc != 0) {
        fail("llama_decode returned " + std::to_string(rc) + " for " + std::to_string(n) + " tokens");
    }

    const size_t k = (size_t) std::min<long>(top_k, n_vocab);
    std::vector<double> logprob(n_vocab);
    std::vector<int32_t> order(n_vocab);
    int non_finite = 0;
    for (int32_t i = 0; i < n; i++) {
        const float * logits = llama_get_logits_ith(ctx, i);
        if (logits == nullptr) {
            fail("llama.cpp returned no logits for position " + std::to_string(i));
        }
        double max = -INFINITY;
        for (int32_t v = 0; v < n_vocab; v++) {
            max = std::max(max, (double) logits[v]);
        }
        double sum = 0.0;
        for (int32_t v = 0; v < n_vocab; v++) {
            sum += std::exp((double) logits[v] - max);
        }
        const double lse = max + std::log(sum);
        for (int32_t v = 0; v < n_vocab; v++) {
            logprob[v] = (double) logits[v] - lse;
            non_finite += !std::isfinite(logprob[v]);
        }

        for (int32_t v = 0; v < n_vocab; v++) {
            order[v] = v;
        }
        auto more_likely = [&](int32_t a, int32_t b) {
            // NaN sorts last, so it never hides a real candidate.
            const bool na = std::isnan(logprob[a]), nb = std::isnan(logprob[b]);
            if (na != nb) {
                return nb;
            }
            if (!na && logprob[a] != logprob[b]) {
                return logprob[a] > logprob[b];
            }
            return a < b;
        };
        std::partial_sort(order.begin(), order.begin() + k, order.end(), more_likely);

        printf("{\"pos\":%d,\"next\":", i);
        if (i + 1 < n) {
            printf("%d,\"next_logprob\":", tokens[i + 1]);
            print_logprob(logprob[tokens[i + 1]]);
        } else {
            fputs("null,\"next_logprob\":null", stdout);
        }
        fputs(",\"top\":[", stdout);
        for (size_t j = 0; j < k; j++) {
            printf("%s[%d,", j ? "," : "", order[j]);
            print_logprob(logprob[order[j]]);
            putchar(']');
        }
        fputs("]}\n", stdout);
    }

    fprintf(stderr,
            "redraft-logprobs: %d tokens, decode %.1f ms (%.1f tokens/s), load %.1f ms, %d threads, vocab %d\n", n,
            decode_ms, n / (decode_ms / 1000.0), load_ms, threads, n_vocab);
    if (non_finite) {
        fprintf(stderr, "redraft-logprobs: warning: %d non-finite logprobs (written as null)\n", non_finite);
    }

    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return fflush(stdout) == 0 ? 0 : 1;
}
