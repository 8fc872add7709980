// headscope — every size, depth and count that headscope refuses to go beyond, in one place.
//
// Model files, tokenizer files, chat templates and HTTP requests come from outside and may be
// corrupt or hostile. Each reader checks what it reads against the budgets below before it
// allocates or recurses, and refuses with an Error (ResourceError where the input is well-formed
// but too big) that names the file or field and the limit. The figures are generous for every
// real model we know of (the largest public checkpoints have ~128 layers, 128 heads, d_model
// 16,384 and vocabularies of ~260K) and small enough that a hostile file cannot make headscope
// allocate tens of gigabytes or overflow its stack. docs/reliability.md explains each choice.
#pragma once
#include <cstddef>
#include <cstdint>

namespace headscope::limits {

// ---- user input (headscope/input.h) ----

// Bytes of one text read from a file or standard input (the CLI's --file, ablate's --corpus) or
// handed to Model.run from Python. A model's position limit is far below it: 16 MiB is hundreds of
// thousands of tokens for any tokenizer.
inline constexpr uint64_t kMaxTextFileBytes = uint64_t{16} << 20;
// Bytes of a gold-data file (CoNLL-U treebank, GAP TSV, an atlas corpus) read whole; the largest
// UD English treebank (EWT train) is 13 MB, GAP's files about 1 MB.
inline constexpr uint64_t kMaxGoldFileBytes = uint64_t{256} << 20;

// Bytes of a corpus file of `headscope run --corpus` (one text per line, JSON Lines or CoNLL-U),
// read whole: a million sentences of about a hundred bytes. Larger corpora go in shards (a Ray
// job, or several runs).
inline constexpr uint64_t kMaxCorpusFileBytes = uint64_t{1} << 30;

// ---- model shape (config.json, GGUF metadata) ----

// Each bound is checked when the hyper-parameters are read, before any per-layer or per-head
// storage is sized; a value beyond it is refused as a ResourceError naming the file and key.
constexpr int64_t kMaxLayers = 1024;          // n_layer: the deepest public models have ~128
constexpr int64_t kMaxHeads = 1024;           // n_head, n_kv_head: the widest have 128
constexpr int64_t kMaxModelWidth = 65536;     // d_model: 4x the largest public model (16,384)
constexpr int64_t kMaxHeadWidth = 4096;       // d_head: real models use 64-256
constexpr int64_t kMaxFeedForward = 1 << 20;  // d_ff: ~53K in the largest dense models, with room
constexpr int64_t kMaxVocabulary = 1 << 22;   // vocab_size and tokenizer vocabularies/ids: ~260K is the largest known
constexpr int64_t kMaxPositions = 1 << 24;    // max_positions: 1M-token contexts exist; 16M ids
// What `Model::run` leaves free of the memory the kernel reports available (MemAvailable), for
// the rest of the process (weights already loaded, the analysis, the server) and the system.
constexpr uint64_t kRunMemoryMarginBytes = uint64_t{512} << 20;
// What a loaded model holds beyond its weights (vocabulary, tokenizer tables, kernel caches),
// counted by Model::load's estimate; the two real models of the tests measure well under it.
constexpr uint64_t kLoadOverheadBytes = uint64_t{64} << 20;

// ---- model files (safetensors, GGUF) ----

// The safetensors reference implementation (huggingface/safetensors, MAX_HEADER_SIZE) refuses
// headers above 100 MB; a corrupt length cannot send more to the JSON parser.
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;
// config.json is read whole into a JSON tree; real ones are 1-10 KB.
constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;
// Load warnings kept (one per tensor with non-finite values); the rest are counted in one line.
constexpr size_t kMaxLoadWarnings = 16;

// ---- tokenizers (tokenizer.json, GGUF vocabularies) and chat templates ----
// Bytes of a tokenizer.json / tokenizer_config.json / vocab.txt read whole; real ones are under 40 MB.
inline constexpr int64_t kMaxTokenizerFileBytes = 512ll << 20;
// Nesting of tokenizer.json (Sequence readers recurse per level); real files nest 6 levels at most.
inline constexpr int kMaxTokenizerJsonDepth = 64;
// Ids may run this far past the number of entries (gaps filled by added tokens); real files: a few.
inline constexpr int64_t kMaxVocabIdSlack = 1 << 16;
// BPE merges in tokenizer.json or GGUF; real files have about as many as vocabulary entries.
inline constexpr int64_t kMaxBpeMerges = 1ll << 22;
// Normalized characters per input character; real pipelines grow text < 10x (NFD Hangul, bytes).
inline constexpr int64_t kMaxNormalizedGrowth = 16;
// Normalized characters allowed beyond that ratio, for prefixes added to short texts (Prepend "▁").
inline constexpr int64_t kMaxNormalizedSlack = 1024;
// Normalized characters of one text in all (20 bytes each with alignments: 320 MB).
inline constexpr int64_t kMaxNormalizedChars = 1ll << 24;
// ICU regex backtracking per text character, in ticks of 10,000 saved states; real patterns: ~0.001.
inline constexpr int64_t kMaxRegexTicksPerChar = 1;
// ICU regex ticks allowed for any text however short (about 50 ms of backtracking).
inline constexpr int64_t kMinRegexTicks = 100;
// Bytes of a chat template source (tokenizer_config.json, GGUF metadata); real ones are < 20 KB.
inline constexpr int64_t kMaxChatTemplateBytes = 1 << 20;
// Nesting of parentheses and subscripts in a template expression (parser recursion); real: < 5.
inline constexpr int kMaxTemplateExpressionDepth = 64;
// Nesting of {% if %} / {% for %} blocks (renderer recursion); real templates: < 6.
inline constexpr int kMaxTemplateBlockDepth = 64;
// Steps of one rendering (pieces, iterations, operands, operators); SmolLM2's takes 31 per message.
inline constexpr int64_t kMaxTemplateSteps = 2'000'000;
// Bytes of any string a template builds (~ and + of strings); far above any prompt we can run.
inline constexpr int64_t kMaxTemplateStringBytes = 16ll << 20;
// Bytes of a rendered prompt; the same reasoning.
inline constexpr int64_t kMaxTemplateOutputBytes = 16ll << 20;
// Bytes copied, compared or scanned by one rendering's string operations (about a second of work).
inline constexpr int64_t kMaxTemplateWorkBytes = 1ll << 30;
// Bytes hashed while deriving the merges of a SentencePiece GGUF vocabulary (characters x bytes of
// every piece); Gemma 3's 262K pieces need ~10 MB, so 1 GiB only stops absurdly long pieces.
inline constexpr int64_t kMaxMergeDerivationBytes = 1ll << 30;
// Bytes of one Unigram piece: Viterbi walks this far from every text position; SentencePiece
// trains pieces of at most 16 characters (64 bytes), so 1 KiB refuses only hostile vocabularies.
inline constexpr int64_t kMaxUnigramPieceBytes = 1024;

// ---- the HTTP server ----
// `headscope serve` listens on loopback for one user's browser; these bound what one client, or a
// web page that tries to reach the server, can make it hold (tools/server/http.cc; docs/api.md "Load").

// Request body (JSON). The longest useful request is a 64 KiB text, escaped: 1 MiB is ample.
inline constexpr size_t kMaxRequestBodyBytes = size_t{1} << 20;
// After a refusal (a body over the limit, a head too large), at most this much more is read and
// dropped so that the client is still listening when the reply arrives; then the socket is closed.
inline constexpr size_t kMaxDiscardedBodyBytes = size_t{16} << 20;
// Nesting depth of a request's JSON. Requests are flat objects (depth 1); 32 leaves room for any
// client and keeps a body of a million '[' from building a million nested values.
inline constexpr int kMaxRequestJsonDepth = 32;
// Text of one request, in bytes (a 512-token text is a few KiB).
inline constexpr size_t kMaxTextBytes = size_t{64} << 10;
// /api/generate: new tokens per request (each one is a forward step).
inline constexpr int kMaxNewTokens = 32;
// Threads that run the sockets (accept, read, parse, write; asynchronous, so a few serve every
// connection) and threads that run the API's handlers, which may compute for seconds: every compute
// slot and waiter below holds one, and a few more answer the rest with 503 at once.
inline constexpr int kIoThreads = 2;
inline constexpr int kHandlerThreads = 40;
// Open connections. When all are taken, a connection idle between requests (or silent since it was
// accepted) is closed to make room for the new one; when none is idle the new one is closed.
inline constexpr int kMaxConnections = 512;
// Seconds from a request's first byte (or from the reply before it) to the end of its head, and
// from the end of the head to the end of its body: whole deadlines, not per read, so a client that
// sends one byte at a time is answered 408 and closed when they pass.
inline constexpr int kHeadTimeoutSeconds = 5;
inline constexpr int kBodyTimeoutSeconds = 30;
// Seconds a connection may stay silent after it was accepted or between two requests, and requests
// per connection (the last reply says Connection: close).
inline constexpr int kKeepAliveTimeoutSeconds = 5;
inline constexpr int kMaxRequestsPerConnection = 100;
// Seconds a whole reply may take to be written (a client that does not read its reply).
inline constexpr int kWriteTimeoutSeconds = 30;
// A refused request's connection is closed after its reply; before closing, what the client still
// sends is read and dropped for at most this long (and kMaxDiscardedBodyBytes), so that it hears
// the reply instead of a reset.
inline constexpr int kLingerSeconds = 5;
// The request head, bounded while it is read: request line (longer: 414), the whole head (431),
// and its header fields (431). A browser's requests are far below these.
inline constexpr size_t kMaxRequestLineBytes = size_t{8} << 10;
inline constexpr size_t kMaxHeaderBytes = size_t{16} << 10;
inline constexpr int kMaxHeaderFields = 100;
// Heavy requests (run, attention, decompose, generate) that may compute or format at once. The
// forward passes themselves run one at a time (each uses every core); the second slot lets a
// cached answer go out while a pass runs.
inline constexpr int kComputeSlots = 2;
// Heavy requests that may wait for a slot. More get 503 at once: a queue that grows without bound
// only turns into timeouts. 30 waiters let the explorer's bursts (a few requests per view) and
// several tabs through.
inline constexpr int kMaxComputeWaiters = 30;
// Seconds a heavy request may wait for a slot before it gets 503 (a browser would give up anyway).
inline constexpr int kMaxComputeWaitSeconds = 60;
// Retry-After of a 503, in seconds.
inline constexpr int kRetryAfterSeconds = 2;

// ---- long texts (src/pipeline/analyse.cc) ----

// Dense attention maps ([n_layer, n_head, T, T] and the word maps) are kept only up to this many
// bytes when the caller leaves the choice to headscope (AnalyseOptions::Maps::kAuto); longer texts
// are streamed. 512 MiB holds all-MiniLM-L6-v2 at its 512-token limit (72 heads) several times.
inline constexpr uint64_t kDenseMapsBytes = uint64_t{512} << 20;
// Cells of one exact attention tile (query rows × keys). A 1,024 × 1,024 tile is 4 MiB of fp32,
// more than a screen shows at full precision.
inline constexpr int64_t kMaxTileCells = int64_t{1} << 20;

// ---- ablation (src/pipeline/ablate.cc) ----

// Texts one Ablator holds (the texts and the reference corpus, each): it keeps every text's clean
// hidden states, [n_layer + 1, T, d_model] — 2.8 MiB for SmolLM2-135M at 40 tokens, so 1,000
// texts stay under 3 GiB. The corpus figures use 100.
inline constexpr size_t kMaxAblationTexts = 1000;
// Characters of a --heads list: "ll.hh," is 6 per head, so 64 KiB names every head of the
// largest model limits.h admits many times over.
inline constexpr size_t kMaxHeadSpecBytes = size_t{64} << 10;

// ---- explorer ablation ----

// Tokens of a text /api/ablate takes: one ablation reruns the text from the first ablated layer
// (at most a forward pass), and mean/resample add one pass per reference sentence; 2,048 tokens of
// SmolLM2 take seconds on two cores, an 8K streamed text would hold the compute slot for minutes.
inline constexpr int64_t kMaxAblateTokens = 2048;
// Tokens × heads of one /api/importance request: it reruns the text once per head, so its cost is
// about T · n_layer · n_head token-passes. SmolLM2-135M spends ~40 s of one core on its 270 heads
// over a 14-token sentence (every pass computes the logits of every token); 16,384 admits 60 tokens
// there (a few minutes at most) and 227 for all-MiniLM-L6-v2's 72 heads (seconds).
inline constexpr int64_t kMaxImportanceTokenPasses = 16384;
// Texts whose importance the server keeps (a few KiB each), so that going back to a text is free.
inline constexpr size_t kImportanceCacheTexts = 16;

// ---- explorer patching (POST /api/patch, /api/logit_lens) ----

// Prompt pairs of one /api/patch request, given or generated from a task: every pair costs two
// whole runs with every activation kept plus one resumed pass per patched site.
inline constexpr int kMaxPatchPairs = 20;
// Resumed passes × prompt tokens of one /api/patch request (PatchCost::token_passes), checked
// before anything runs. SmolLM2-135M patches its 270 heads over a 14-token IOI pair (3,780) in
// 4–12 s on two cores, so 32,768 admits eight such pairs (a minute or two at most), all 72 heads
// of all-MiniLM-L6-v2 per position over a 16-token pair (18,432: seconds), and per-position sweeps
// of a decoder once they are narrowed to a few layers.
inline constexpr int64_t kMaxPatchTokenPasses = 32768;
// Model::gradients keeps every layer's activations from its forward pass when they fit in this
// many bytes (short texts: attribution patching's prompts), so the backward reads them instead of
// computing each layer again from its input; longer texts keep one layer at a time (recomputed).
inline constexpr uint64_t kGradientTapeBytes = uint64_t{256} << 20;
// Top tokens per layer of one /api/logit_lens reply, and the tokens it may follow through the layers.
inline constexpr int kMaxLensTopK = 50;
inline constexpr int kMaxLensTokens = 16;

// ---- explorer composition scores (POST /api/composition) ----

// Random draws of one /api/composition baseline: each scores one random sender and receiver of
// the model's shapes (100 draws take 0.3 s for SmolLM2-135M on two cores), so 1,000 hold a compute
// slot for a few seconds at most.
inline constexpr int kMaxCompositionDraws = 1000;
// Option sets (draws, seed, gains) whose scores the server keeps: the scores are a pure function
// of the weights, 3 · (n_layer · n_head)² floats (0.9 MB for SmolLM2-135M, 62 KB for
// all-MiniLM-L6-v2), so asking again costs only the reply's formatting.
inline constexpr size_t kCompositionCacheSets = 4;
// Highest pairs per kind one reply lists.
inline constexpr int kMaxCompositionTop = 1000;

// ---- attribution (src/analysis/attribution.cc) ----

// Norm-weighted maps built at once ([n_layer, n_head, T, T] fp32, a second copy beside the dense
// maps): the limit of the dense maps kept by default, so asking for them never more than doubles
// what a default run holds. Beyond, value_norms.npy times attentions.npy gives the same per head.
inline constexpr uint64_t kMaxNormWeightedBytes = kDenseMapsBytes;
// Tokens of an attention rollout: it multiplies n_layer T × T matrices (n_layer · T³ multiply-adds,
// ~64 GFLOP for SmolLM2's 30 layers at 1,024 tokens: seconds on two cores; 8K would take hours).
inline constexpr int64_t kMaxRolloutTokens = 1024;

// ---- corpus evidence ----

// Treebank sentences run for the cached corpus evidence (src/pipeline/evidence.cc), in each of the
// report (UD PUD) and selection (UD EWT dev) files: 300 of each keep the relations the explorer
// names above their 100-dependent support and take about 20 s on two cores for all-MiniLM-L6-v2.
inline constexpr int64_t kEvidenceSentences = 300;
// The head map's corpus: the first sentences of UD EWT dev (pipeline.h, cached_head_map).
inline constexpr int64_t kHeadMapTexts = 40;
// GAP rows run in each of the report and selection files for the same cache: ~15 s on two cores.
inline constexpr int64_t kEvidenceGapRows = 200;
// Links named in a head's text description ("'it' → 'trophy' 0.58; ..."): a sentence, not a table.
inline constexpr int kMaxTextLinks = 4;
// Bytes of a cached evidence file read back; a real one is ~100 KiB per 1,000 heads, so a bigger
// file is not ours and is recomputed instead of parsed.
inline constexpr uint64_t kMaxEvidenceFileBytes = uint64_t{64} << 20;

// ---- atlas importance ----
// Heads of a model whose atlas measures importance unless told otherwise (--importance): each head
// costs one resumed pass per text, about a minute for MiniLM's 72 heads over 50 sentences on 2
// cores; the 270 heads of SmolLM2-135M take many minutes, so past 144 it is asked for, not default.
inline constexpr int kMaxAtlasImportanceHeadsByDefault = 144;

// ---- Python bindings (python/, src/pipeline/analyse.cc analyse_attention) ----
// How far a row of attention handed in from outside may sum away from 1: float32 softmax rows of
// a few thousand keys stay within ~1e-5; 1e-3 also takes float16 maps cast back to float32.
inline constexpr double kMaxAttentionRowSumError = 1e-3;
// Bytes of one text given to Model.run / Tokenizer.encode from Python: the CLI's --file limit,
// so the same text is refused the same way (a model's position limit is far below it anyway).
inline constexpr uint64_t kMaxPythonTextBytes = kMaxTextFileBytes;

// ---- fuzz (fuzz/*_fuzzer.cc; docs/reliability.md, "Fuzzing") ----
// Tokens of the attention maps analyse_fuzzer builds ([<=3, <=3, T, T]): 128 keeps a map at most
// 0.6 MB and one input's analysis far inside libFuzzer's 10 s, so a 20 s run tries many shapes.
inline constexpr int64_t kMaxFuzzAnalyseTokens = 128;

// ---- XLM-R GGUF (src/tokenizer/gguf_vocab.cc xlmr_from_gguf) ----
// Bytes of tokenizer.ggml.precompiled_charsmap, which is copied out of the file: XLM-R's nmt_nfkc
// rules take ~240 KB and every SentencePiece rule set is of that order, so 16 MiB is ample.
inline constexpr int64_t kMaxPrecompiledCharsmapBytes = 16ll << 20;

}  // namespace headscope::limits
