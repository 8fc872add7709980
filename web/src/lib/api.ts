// The explorer's client for the headscope HTTP API (docs/api.md). Types mirror the JSON the
// server writes (tools/server/api.cc); tensors arrive as binary (attention) or base64 typed
// arrays (decomposition) and are decoded into Float32Array views with a shape.

import { decodeTensor, decodeTypedArray, type Tensor, type TypedArrayJson } from './wire';
import type { Level } from './state';
import type { OverviewInfo } from './long';
import type { MapAvailability, MapView } from './maps';

export interface RoleInfo {
  id: string;
  name: string;
  description: string;
  typical_function: string;
  literature: string;
  color: string;
}

export interface ModelInfo {
  name: string;
  architecture: string;
  n_layer: number;
  n_head: number;
  n_kv_head: number;
  d_model: number;
  d_head: number;
  d_ff: number;
  vocab_size: number;
  max_positions: number;
  causal: boolean;
  kv_head_of: number[];
  /** Per layer, the sliding window (query q sees keys q − window + 1 .. q); 0 = none. Absent in
   *  payloads written before it existed. */
  window?: number[];
  w_o_shape: [number, number];
  limits: { max_text_bytes: number; max_tokens: number };
  statistics: {
    sparsity_fraction: number;
    cover_mass: number;
    local_window: number;
    max_offset: number;
    min_role_score: number;
  };
  /** Every HeadStats field described once by the core (statistics_catalogue in docs/schema.md). */
  statistics_catalogue: StatInfo[];
  roles: RoleInfo[];
  /** What the syntactic and coreference roles were measured on (the server adds it; absent in an
   *  embedded result). `source` starts with "not measured yet" or "none" when there is no evidence. */
  corpus_evidence?: CorpusEvidence;
}

/** GET /api/model's corpus_evidence: whether the corpus roles are on, and on what they were measured. */
export interface CorpusEvidence {
  source: string;
  syntax: boolean;
  coreference: boolean;
}

/** A statistic's catalogue entry (headscope/analysis.h, StatInfo): its HeadStats key, how to label
 *  and read it, and the constants its formula uses, by name ({"cover_mass": 0.9}). */
export interface StatInfo {
  key: keyof HeadStats;
  kind: 'mean' | 'count' | 'offsets';
  label: string;
  /** bits, ratio, share, weight, keys, positions or queries. */
  unit: string;
  help: string;
  constants: Record<string, number>;
}

/** POST /api/generate: greedy continuation through the KV cache (causal models). */
export interface GenerateResult {
  prompt: string;
  prompt_tokens: number;
  ids: number[];
  generated: { position: number; id: number; text: string; logit: number | null }[];
  continuation: string;
  text: string;
  retokenizes_same: boolean;
  stopped_at_eos: boolean;
  stopped_at_limit: boolean;
}

export interface TokenInfo {
  id: number;
  text: string;
  /** How the token reads: the text it covers, with no byte-level symbols (Ġ, Ċ); "##" kept on
   *  WordPiece continuations; whitespace-only tokens as ␣ ↵ ⇥ (tokenizer.h, token_display). */
  display?: string;
  begin: number;
  end: number;
  special: boolean;
  word: number;
}

export interface WordUnit {
  text: string;
  tokens: number[];
  special: boolean;
}

/** Per-head statistics (headscope/analysis.h; JSON shape in docs/schema.md); null where there was no sample. */
export interface HeadStats {
  n_queries: number;
  entropy_bits: number | null;
  entropy_norm: number | null;
  sparsity: number | null;
  keys_90: number | null;
  keys_90_share: number | null;
  max_attention: number | null;
  avg_attention: number | null;
  uniform_overlap: number | null;
  mean_distance: number | null;
  mean_offset: number | null;
  self_mass: number | null;
  prev_mass: number | null;
  next_mass: number | null;
  local_mass: number | null;
  /** Mean mass at each signed offset k − q, keyed "-8" … "8" (max_offset of the model info). */
  offset_mass: Record<string, number | null>;
  n_sink_queries: number; // queries whose sliding window holds the first position (all without a window)
  first_mass: number | null;
  special_mass: number | null;
  end_special_mass: number | null;
  sink_mass: number | null;
  sink_mass_norm: number | null; // the sink share under norm weighting (token level)
  punct_mass: number | null;
  content_mass: number | null;
  duplicate_mass: number | null;
  n_duplicate_queries: number;
}

export interface RoleScore {
  id: string;
  name: string;
  score: number | null;
  detail: string;
  /** name and detail as every frontend shows them ("Fixed offset +2"), written by the core. */
  label: string;
  evidence: string;
}

export interface HeadRoles {
  primary: RoleScore;
  secondary: RoleScore;
  confidence: number | null;
  margin: number | null;
  scores: RoleScore[];
}

/** One link of a head on the text: query token → key token (docs/schema.md, "on_text"). */
export interface TextLink {
  query: number;
  key: number;
  /** Weight with the sink columns dropped and the row renormalised. */
  weight: number | null;
  raw_weight: number | null;
}

/** What a head does on this text, in words: strongest links with the sink discounted, and the
 *  corpus role (syntactic / coreference) they show, if any. */
export interface TextEvidence {
  links: TextLink[];
  links_text: string;
  recognised: string | null;
  matching: TextLink[];
  recognised_text: string;
}

/** POST /api/link: every head's weight from token q to token k, strongest first. */
export interface LinkResult {
  q: number;
  k: number;
  query: string;
  key: string;
  sink_columns: string;
  heads: { layer: number; head: number; weight: number | null; weight_no_sink: number | null; roles: HeadRoles }[];
}

export interface HeadReport {
  layer: number;
  head: number;
  /** This head on this text in words (dense runs). */
  on_text?: TextEvidence;
  /** The key/value head this query head reads (equal to head without grouped-query attention). */
  kv_head: number;
  stats: HeadStats;
  roles: HeadRoles;
}

export type SpecialMode = 'keep' | 'hide';

export interface RunResult {
  /** "headscope.run/2": the same object `headscope run --json` writes. */
  schema: string;
  text: string;
  truncated: boolean;
  level: Level;
  /** 'hide': statistics and roles computed with special tokens removed, rows renormalised. */
  special: SpecialMode;
  n_tokens: number;
  n_units: number;
  tokens: TokenInfo[];
  words: WordUnit[];
  /** n_layer × n_head reports, index layer * n_head + head. */
  heads: HeadReport[];
  /** The columns the text links leave out: "[CLS] and [SEP]" or "the first token". */
  sink_columns?: string;
  /** True for a long text whose maps were streamed: /api/attention refuses it; the maps are read
   *  through /api/overview (pooled) and /api/tile (exact). */
  streamed?: boolean;
  /** Per map view: null when /api/attention can send it for this run, else why not. */
  views?: MapAvailability;
  /** The pooled overview's cells (token level). */
  overview?: OverviewInfo;
}

/** The W_O decomposition of one token in one layer (POST /api/decompose), decoded. */
export interface Decomposition {
  layer: number;
  token: number;
  n_head: number;
  d_head: number;
  d_model: number;
  w_o_shape: [number, number];
  head_outputs: Tensor; // [n_head, d_head]
  head_output_norms: Tensor; // [n_head]
  concat: Tensor; // [n_head * d_head]
  projection: Tensor; // [d_model]   W_O · concat
  bias: Tensor; // [d_model]
  contributions: Tensor; // [n_head, d_model]
  contribution_norms: Tensor; // [n_head]
  attn_output: Tensor; // [d_model]  Σ contributions + bias, as captured
  attention_rows: Tensor; // [n_head, T]
  check: { sum_max_abs_error: number; projection_max_abs_error: number };
}

interface DecompositionJson extends Omit<
  Decomposition,
  | 'head_outputs'
  | 'head_output_norms'
  | 'concat'
  | 'projection'
  | 'bias'
  | 'contributions'
  | 'contribution_norms'
  | 'attn_output'
  | 'attention_rows'
> {
  head_outputs: TypedArrayJson;
  head_output_norms: TypedArrayJson;
  concat: TypedArrayJson;
  projection: TypedArrayJson;
  bias: TypedArrayJson;
  contributions: TypedArrayJson;
  contribution_norms: TypedArrayJson;
  attn_output: TypedArrayJson;
  attention_rows: TypedArrayJson;
}

export function decodeDecomposition(j: DecompositionJson): Decomposition {
  return {
    ...j,
    head_outputs: decodeTypedArray(j.head_outputs),
    head_output_norms: decodeTypedArray(j.head_output_norms),
    concat: decodeTypedArray(j.concat),
    projection: decodeTypedArray(j.projection),
    bias: decodeTypedArray(j.bias),
    contributions: decodeTypedArray(j.contributions),
    contribution_norms: decodeTypedArray(j.contribution_norms),
    attn_output: decodeTypedArray(j.attn_output),
    attention_rows: decodeTypedArray(j.attention_rows),
  };
}

/** The ablation modes of POST /api/ablate (docs/causal.md): the head's output replaced by zeros,
 *  by its mean over the server's reference sentences, or by a reference sentence's output. */
export type AblationMode = 'zero' | 'mean' | 'resample';

/** POST /api/ablate: what removing `heads` (0-based [layer, head]) did to this text. */
export interface AblateResult {
  heads: [number, number][];
  mode: AblationMode;
  /** Where mean / resample take head outputs from; null for zero ablation. */
  reference: string | null;
  tokens: number;
  /** Decoders: Δ mean next-token loss in nats; encoders: 1 − cos of the sentence embedding. */
  effect: number;
  unit: 'nats' | '1 - cos';
  /** [n_layer] ‖h′ − h‖ / ‖h‖ of each layer's output (hidden state after layer l). */
  layer_change: number[];
  embedding_distance?: number;
  loss_before?: number[];
  loss_after?: number[];
  mean_loss_before?: number;
  mean_loss_after?: number;
  /** Positions t whose top-1 next token changed. */
  top1_changed?: number[];
  /** The top-1 next token after the last token, before and after the ablation. */
  next_before?: { id: number; text: string; p: number };
  next_after?: { id: number; text: string; p: number };
}

/** One head of an importance reply (the same object as in `headscope ablate --all-heads`). */
export interface HeadImportance {
  layer: number;
  head: number;
  /** The effect of removing this head alone. */
  ablation: number | null;
  /** Mean ‖head contribution‖ / ‖residual stream‖, the cheap proxy. */
  proxy: number | null;
  /** 1 = the largest effect (ties: layer-major order). */
  rank: number;
}

/** POST /api/importance: every head's zero-ablation effect on this text. */
export interface ImportanceResult {
  shape: [number, number];
  tokens: number;
  mode: AblationMode;
  measure: 'delta_loss' | 'embedding_distance';
  unit: 'nats' | '1 - cos';
  /** [n_layer · n_head] one object per head, layer-major: importance[l · n_head + h] is head (l, h). */
  importance: HeadImportance[];
  spearman: number | null;
  seconds: number;
  cached: boolean;
}

/** What activation patching swaps (docs/api.md, POST /api/patch): a head's output at every
 *  position or at one, its query, the key or value of a key/value head (the whole query group
 *  reading it), its attention pattern, the residual stream at one position, or a block's output. */
export type PatchSite = 'head' | 'head_position' | 'q' | 'k' | 'v' | 'pattern' | 'resid' | 'attn' | 'mlp';
export type PatchDirection = 'denoise' | 'noise';
export type PatchMetric = 'logit_diff' | 'prob' | 'loss' | 'cosine';
export type PathInput = 'q' | 'k' | 'v' | 'logits';
/** How a sweep measures each site: patching it for real (one run per site), the first-order
 *  estimate from gradients (attribution patching: one backward pass for every site), or both. */
export type PatchMethod = 'exact' | 'attribution' | 'both';

/** POST /api/patch: one prompt pair and either a sweep (sites) or path patching (senders). */
export interface PatchRequest {
  clean: string;
  corrupt: string;
  /** Decoders: the answer token and the competing one, each written as it follows the prompt. */
  answer?: string;
  wrong?: string;
  sites?: PatchSite[];
  direction?: PatchDirection;
  metric?: PatchMetric;
  /** Only these layers (0-based); absent: every layer. */
  layers?: number[];
  /** Path patching: the sender heads, [layer, head] 0-based. */
  senders?: [number, number][];
  receivers?: [number, number][];
  input?: PathInput;
  /** A sweep: exact (the default), attribution or both. */
  method?: PatchMethod;
  /** With attribution or both: also estimate every edge between heads (decoders only). */
  edges?: boolean;
}

/** One result of a sweep (the pipeline's PatchEffect). */
export interface PatchEffect {
  site: PatchSite;
  layer: number;
  /** Query head, or key/value head for k and v; null for resid, attn and mlp. */
  head: number | null;
  position: number | null;
  /** k and v: the query heads that read this key/value head (all patched together). */
  group?: number[];
  /** The metric of the patched run (mean over pairs). */
  value: number | null;
  /** (value − corrupt) / (clean − corrupt): 1 = the clean behaviour, 0 = the corrupted one. */
  normalised: number | null;
}

/** One edge of attribution patching: the sender head's output reaching one input of a later head
 *  (or the logits directly). value: the estimated change of the metric along this edge alone. */
export interface PatchEdge {
  sender: [number, number];
  /** null: the logits (input "logits"). */
  receiver: [number, number] | null;
  input: PathInput;
  value: number | null;
  normalised: number | null;
}

/** The first-order estimates of a sweep's sites (and edges), from one backward pass. An estimate's
 *  value is base + (a_source − a_base) · gradient, the patched metric as a straight line predicts it. */
export interface PatchAttribution {
  results: PatchEffect[];
  clean: number | null;
  corrupt: number | null;
  edges: PatchEdge[];
  forward_passes: number;
  backward_passes: number;
  seconds: { wall: number; cpu: number };
}

/** How the estimates agree with the exact sweep of the same sites (method "both"). */
export interface PatchAgreement {
  /** Rank correlation of the patched metrics over the sites (null where undefined). */
  spearman: number | null;
  pearson: number | null;
  /** Sites of the exact top 10 (by |effect|) that the estimate ranks in its top 10 too. */
  top10_shared: number;
  sites: number;
  /** Results of the exact sweep whose rank the estimate gets most wrong, most first (up to 10). */
  misranked: PatchEffect[];
}

/** The reply of POST /api/patch ("headscope.patch/1", the document `headscope patch --json` writes). */
export interface PatchResult {
  schema: string;
  task: string;
  seed: number;
  seconds: { wall: number; cpu: number };
  n_pairs: number;
  n_tokens?: number;
  metric: PatchMetric;
  direction: PatchDirection;
  clean: number | null;
  corrupt: number | null;
  /** A sweep: one entry per site, layer-major (method "attribution": the estimates). */
  results?: PatchEffect[];
  passes?: number;
  method?: PatchMethod;
  /** Methods "attribution" and "both". */
  attribution?: PatchAttribution;
  /** Method "both". */
  agreement?: PatchAgreement;
  /** Path patching. */
  path?: {
    senders: [number, number][];
    receivers: [number, number][];
    input: PathInput;
    results: { receivers: [number, number][]; value: number | null; normalised: number | null }[];
    value?: number | null;
    normalised?: number | null;
  };
}

/** A token of the logit lens (POST /api/logit_lens). */
export interface LensEntry {
  id: number;
  /** The token as the tokenizer decodes it alone (" Paris"). */
  text: string;
  logit: number | null;
  probability: number | null;
  /** 0 for the largest logit of the row. */
  rank: number;
}

/** POST /api/logit_lens ("headscope.lens/1"): every layer's residual stream at one position read
 *  through the final norm and the unembedding; layer 0 is the embeddings, n_layer the output. */
export interface LensResult {
  schema: string;
  tokens: TokenInfo[];
  position: number;
  token: { id: number; text: string; display: string };
  top_k: number;
  /** True when no token was named and the model's own prediction is followed. */
  followed_prediction: boolean;
  layers: { layer: number; top: LensEntry[]; followed: LensEntry[] }[];
}

/** POST /api/head_lens: one head of a decoder read through the unembedding at one position. */
export interface HeadLensRequest {
  text: string;
  /** 0-based, as the API counts. */
  layer: number;
  head: number;
  /** The position read; absent: the last token. */
  position?: number;
  /** Tokens to follow, each written as it follows the text (" Mary"); absent: the model's prediction. */
  tokens?: string[];
  /** Tokens listed as raised and as lowered. */
  top_k?: number;
  truncate?: boolean;
}

/** A token of a head's logit lens. */
export interface HeadLensEntry {
  id: number;
  /** The token as the tokenizer decodes it alone (" Mary"). */
  text: string;
  /** The head's direct effect on this token's logit: its output through W_O, the norms linearised
   *  at the run's own scale, and the unembedding. */
  logit: number | null;
  /** Where the head puts this token among the vocabulary: 0 for the one it raises most. */
  rank: number;
  /** The model's own logit of the token at this position. */
  model_logit: number | null;
}

/** The reply of POST /api/head_lens ("headscope.head_lens/1"); decoders only (encoders: 400 not_causal). */
export interface HeadLensResult {
  schema: string;
  model: Pick<ModelInfo, 'name' | 'architecture' | 'causal' | 'n_layer' | 'n_head' | 'n_kv_head' | 'vocab_size'>;
  tokens: TokenInfo[];
  position: number;
  token: { id: number; text: string; display: string };
  layer: number;
  head: number;
  /** The key/value head the head reads (equal to head without grouped-query attention). */
  kv_head: number;
  top_k: number;
  /** True when no token was named and the model's own prediction is followed. */
  followed_prediction: boolean;
  /** How the norms after the head were linearised, in a sentence. */
  readout: string;
  /** The top_k tokens the head raises most, most first. */
  promoted: HeadLensEntry[];
  /** The top_k tokens it lowers most, most first. */
  suppressed: HeadLensEntry[];
  /** The named tokens in the order asked (or the prediction). */
  followed: HeadLensEntry[];
}

/** How saliency credits each input token: integrated gradients (the gradient averaged along a
 *  straight path from a baseline to the text, times the difference) or gradient × input. */
export type SaliencyMethod = 'integrated_gradients' | 'grad_x_input';
export type SaliencyRule = 'gausslegendre' | 'riemann_left' | 'riemann_right' | 'riemann_middle' | 'trapezoid';

/** POST /api/saliency: one text; decoders name the answer and wrong tokens, encoders a reference text. */
export interface SaliencyRequest {
  text: string;
  method?: SaliencyMethod;
  /** Decoders: logit_diff (default), prob or loss; encoders: cosine. */
  metric?: PatchMetric;
  answer?: string;
  wrong?: string;
  /** Encoders: the text whose sentence embedding the metric compares with. */
  reference?: string;
  /** Integrated gradients: points along the path (default 50). */
  steps?: number;
  rule?: SaliencyRule;
  /** A token id whose embedding is the baseline; absent: zero embeddings. */
  baseline?: number;
  keep_special?: boolean;
  truncate?: boolean;
}

/** A token of the text with its saliency score: its share of metric(text) − metric(baseline). */
export interface SaliencyToken extends TokenInfo {
  index: number;
  score: number | null;
}

/** The reply of POST /api/saliency ("headscope.saliency/1"). */
export interface SaliencyResult {
  schema: string;
  text: string;
  tokens: SaliencyToken[];
  method: SaliencyMethod;
  metric: PatchMetric;
  /** The metric at the text. */
  value: number | null;
  /** The sum of the scores. */
  total: number | null;
  /** Integrated gradients: the metric at the baseline (every token's embedding replaced), and
   *  value − baseline_value − total, what the scores leave unexplained. Gradient × input has neither. */
  baseline_value?: number | null;
  completeness_gap?: number | null;
  /** Integrated gradients: "zero" or the baseline token's id. */
  baseline?: 'zero' | number;
  steps?: number;
  rule?: SaliencyRule;
  backward_passes: number;
  seconds: { wall: number; cpu: number };
}

/** POST /api/tokenize: a text's tokens as the model reads it (no model run). */
export interface TokenizeResult {
  text: string;
  special: boolean;
  n_tokens: number;
  tokens: TokenInfo[];
}

/** The three kinds of composition (docs/circuits.md, "Composition scores"): what a sender's output
 *  feeds in a later receiver — its queries, its keys or its values. */
export type CompositionKind = 'Q' | 'K' | 'V';

/** POST /api/composition: every field optional. */
export interface CompositionRequest {
  /** Random heads scored for the baseline, 2–1000 (default 100). */
  draws?: number;
  seed?: number;
  /** Fold the norms' gains into the matrices (default true). */
  gains?: boolean;
  /** Highest pairs listed per kind, 1–1000 (default 10). */
  top?: number;
}

/** A pair of heads of the composition reply, 0-based. */
export interface CompositionPair {
  sender: { layer: number; head: number };
  receiver: { layer: number; head: number };
  score: number;
}

/** The reply of POST /api/composition ("headscope.composition/1", `headscope composition --json`). */
export interface CompositionResult {
  schema: string;
  definition: string;
  folded: string;
  rope: string;
  /** [n_layer, n_head, n_layer, n_head]: sender layer, sender head, receiver layer, receiver head. */
  shape: [number, number, number, number];
  masked: string;
  /** Nested lists in `shape`, 0 where the receiver's layer is not after the sender's. */
  scores: Record<CompositionKind, number[][][][]>;
  baseline: { draws: number; seed: number } & Record<CompositionKind, { mean: number; std: number }>;
  top: Record<CompositionKind, CompositionPair[]>;
  seconds: { scores: number; baseline: number; cpu: number };
  /** Whether the server had these scores already (they depend on the weights only). */
  cached: boolean;
}

/** One head of the head map, 0-based (layer, head, its key/value head) and its place on the map. */
export interface HeadMapPoint {
  layer: number;
  head: number;
  kv_head: number;
  x: number;
  y: number;
}

/** The reply of POST /api/head_map ("headscope.head_map/1"): every head placed by how alike its
 *  attention is to every other head's over a corpus (classical MDS of √ mean Jensen–Shannon divergence). */
export interface HeadMapResult {
  schema: string;
  n_layer: number;
  n_head: number;
  /** Texts and query rows of the corpus the heads were compared on. */
  texts: number;
  rows: number;
  /** The two axes' share of the positive eigenvalue mass (0–1). */
  explained: number;
  eigenvalues: number[];
  /** Layer-major: heads[l · n_head + h]. */
  heads: HeadMapPoint[];
  /** distance[i][j]: √ of the mean Jensen–Shannon divergence (bits) of heads i and j's rows. */
  distance: number[][];
  /** The corpus, in words. */
  source: string;
  cached: boolean;
}
/** One model of GET /api/models: its 0-based index (the value of the Headscope-Model header that
 *  asks it) and what GET /api/model answers for it. */
export interface ServedModel {
  index: number;
  model: ModelInfo;
}

/** The header that sends a request to one model of a server serving several (docs/api.md). */
export const MODEL_HEADER = 'Headscope-Model';

/** An error reply of the API: {"error": {status, code, message}}. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

async function check(res: Response): Promise<Response> {
  if (res.ok) return res;
  let code = 'http_error';
  let message = `HTTP ${res.status}`;
  try {
    const j = await res.json();
    code = j.error?.code ?? code;
    message = j.error?.message ?? message;
  } catch {
    /* not JSON: keep the status line */
  }
  throw new ApiError(res.status, code, message);
}

/** Keeps the last `capacity` promises by key, so that repeated questions cost nothing. */
export class PromiseCache<T> {
  private entries = new Map<string, Promise<T>>();
  constructor(private readonly capacity: number) {}
  get(key: string, make: () => Promise<T>): Promise<T> {
    const hit = this.entries.get(key);
    if (hit) {
      this.entries.delete(key);
      this.entries.set(key, hit);
      return hit;
    }
    const p = make();
    this.entries.set(key, p);
    p.catch(() => this.entries.delete(key));
    while (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value as string);
    return p;
  }
  get size(): number {
    return this.entries.size;
  }
}

/** The explorer's client. Every request sends "truncate": true, so that a text longer than the
 *  server's --max-tokens is analysed up to that limit (the run says `truncated`) instead of refused;
 *  all requests about one text then share the server's one cached run. */
export class ApiClient {
  private runs = new PromiseCache<RunResult>(8);
  private attentions = new PromiseCache<Tensor>(24);
  private decompositions = new PromiseCache<Decomposition>(32);
  private overviews = new PromiseCache<Tensor>(16);
  private tiles = new PromiseCache<Tensor>(48);
  private ablations = new PromiseCache<AblateResult>(32);
  private importances = new PromiseCache<ImportanceResult>(8);
  private patches = new PromiseCache<PatchResult>(16);
  private saliencies = new PromiseCache<SaliencyResult>(16);
  private lenses = new PromiseCache<LensResult>(16);
  private headLenses = new PromiseCache<HeadLensResult>(32);
  private tokenizations = new PromiseCache<TokenizeResult>(64);
  private compositions = new PromiseCache<CompositionResult>(4);
  private headMaps = new PromiseCache<HeadMapResult>(1);

  /** The clients of the other models, one per index (forModel). */
  private others = new Map<number, ApiClient>();

  /** modelIndex: the model of a several-model server every request asks (the Headscope-Model
   *  header); null sends no header, and the server answers for its first model. */
  constructor(
    private readonly base = '',
    readonly modelIndex: number | null = null,
  ) {}

  /** A client whose every request goes to model `index` of the server (with its own caches). */
  forModel(index: number): ApiClient {
    if (index === this.modelIndex) return this;
    let c = this.others.get(index);
    if (!c) this.others.set(index, (c = new ApiClient(this.base, index)));
    return c;
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return this.modelIndex === null ? extra : { ...extra, [MODEL_HEADER]: String(this.modelIndex) };
  }

  private post(path: string, body: unknown): Promise<Response> {
    return fetch(this.base + path, {
      method: 'POST',
      headers: this.headers({ 'Content-Type': 'application/json' }),
      body: JSON.stringify(body),
    }).then(check);
  }

  async generate(text: string, maxNewTokens: number): Promise<GenerateResult> {
    return (await this.post('/api/generate', { text, max_new_tokens: maxNewTokens })).json();
  }

  async link(text: string, q: number, k: number, limit = 8): Promise<LinkResult> {
    return (await this.post('/api/link', { text, truncate: true, q, k, limit })).json();
  }

  async model(): Promise<ModelInfo> {
    return (await check(await fetch(this.base + '/api/model', { headers: this.headers() }))).json();
  }

  /** Every model the server serves (GET /api/models): one, or several (serve --model A --model B). */
  async models(): Promise<ServedModel[]> {
    return ((await (await check(await fetch(this.base + '/api/models'))).json()) as { models: ServedModel[] }).models;
  }

  run(text: string, level: Level, special: SpecialMode = 'keep'): Promise<RunResult> {
    return this.runs.get(JSON.stringify([text, level, special]), async () =>
      (await this.post('/api/run', { text, truncate: true, level, special })).json(),
    );
  }

  /** Attention of one layer (or every layer when layer is null): [layers, n_head, U, U]; with
   *  view 'rollout' [layers, 1, U, U] (one map per layer). */
  attention(
    text: string,
    level: Level,
    layer: number | null,
    dtype: 'float32' | 'uint8' = 'float32',
    view: MapView = 'weights',
  ): Promise<Tensor> {
    const body =
      view === 'weights'
        ? { text, truncate: true, level, layer, dtype }
        : { text, truncate: true, level, layer, dtype, view };
    return this.attentions.get(JSON.stringify(body), async () =>
      decodeTensor(await (await this.post('/api/attention', body)).arrayBuffer()),
    );
  }

  /** Pooled maps of every head of a layer (streamed runs): [n_head, 2, cells, cells], [:, 0] the
   *  summed and [:, 1] the largest weight of each block of tokens. */
  overview(text: string, layer: number): Promise<Tensor> {
    const body = { text, truncate: true, layer };
    return this.overviews.get(JSON.stringify(body), async () =>
      decodeTensor(await (await this.post('/api/overview', body)).arrayBuffer()),
    );
  }

  /** Exact weights of head (layer, head) over rows q0 .. q1 − 1 and keys k0 .. k1 − 1: [q1 − q0, k1 − k0];
   *  view 'norm': the norm-weighted shares of the same cells. */
  tile(
    text: string,
    layer: number,
    head: number,
    q0: number,
    q1: number,
    k0: number,
    k1: number,
    view: 'weights' | 'norm' = 'weights',
  ): Promise<Tensor> {
    const body = { text, truncate: true, layer, head, q0, q1, k0, k1, ...(view === 'norm' ? { view } : {}) };
    return this.tiles.get(JSON.stringify(body), async () =>
      decodeTensor(await (await this.post('/api/tile', body)).arrayBuffer()),
    );
  }

  decompose(text: string, layer: number, token: number): Promise<Decomposition> {
    const body = { text, truncate: true, layer, token };
    return this.decompositions.get(JSON.stringify(body), async () =>
      decodeDecomposition(await (await this.post('/api/decompose', body)).json()),
    );
  }

  /** heads: 0-based [layer, head] pairs, removed together. */
  ablate(text: string, heads: [number, number][], mode: AblationMode = 'zero'): Promise<AblateResult> {
    const body = { text, truncate: true, heads, mode };
    return this.ablations.get(JSON.stringify(body), async () => (await this.post('/api/ablate', body)).json());
  }

  /** Activation or path patching (docs/api.md); the same request is answered once. */
  patch(request: PatchRequest): Promise<PatchResult> {
    return this.patches.get(JSON.stringify(request), async () => (await this.post('/api/patch', request)).json());
  }

  /** Each token's saliency for a metric (integrated gradients or gradient × input). */
  saliency(request: SaliencyRequest): Promise<SaliencyResult> {
    return this.saliencies.get(JSON.stringify(request), async () => (await this.post('/api/saliency', request)).json());
  }

  /** The logit lens of `text` at `position` (null: the last token), following `tokens` (none: the prediction). */
  logitLens(text: string, position: number | null, tokens: string[] = [], topK = 10): Promise<LensResult> {
    const body = { text, truncate: true, top_k: topK, ...(position === null ? {} : { position }), tokens };
    return this.lenses.get(JSON.stringify(body), async () => (await this.post('/api/logit_lens', body)).json());
  }

  /** One head's logit lens (decoders). The explorer sends the request as given: a patching prompt
   *  is read at its own last token, so it is not truncated unless asked. */
  headLens(request: HeadLensRequest): Promise<HeadLensResult> {
    return this.headLenses.get(JSON.stringify(request), async () =>
      (await this.post('/api/head_lens', request)).json(),
    );
  }

  /** The tokens of `text`; special: with the model's special tokens (as a prompt is run), or bare (an answer). */
  tokenize(text: string, special = true): Promise<TokenizeResult> {
    const body = { text, special };
    return this.tokenizations.get(JSON.stringify(body), async () => (await this.post('/api/tokenize', body)).json());
  }

  /** Q-, K- and V-composition of every pair of heads, from the weights (no text). */
  composition(request: CompositionRequest = {}): Promise<CompositionResult> {
    return this.compositions.get(JSON.stringify(request), async () =>
      (await this.post('/api/composition', request)).json(),
    );
  }

  /** Every head as a point on the head map (no text: measured once over the server's corpus). */
  headMap(): Promise<HeadMapResult> {
    return this.headMaps.get('{}', async () => (await this.post('/api/head_map', {})).json());
  }

  importance(text: string): Promise<ImportanceResult> {
    const body = { text, truncate: true };
    return this.importances.get(JSON.stringify(body), async () => (await this.post('/api/importance', body)).json());
  }
}
