// The explorer's data without a server: a run and its dense attention embedded in the page (a
// notebook cell, a standalone HTML file written by python/headscope/views.py). EmbeddedClient
// answers the ApiClient calls the views make from that payload; what needs the model itself
// (ablation, importance, generation, the W_O decomposition, streamed tiles, other texts,
// patching, the logit lens, composition scores) is
// refused with an ApiError that says so.
//
// The payload ("headscope.embed/1"), a JSON object:
//   run        the run document of `headscope run --json` / POST /api/run (docs/schema.md)
//   attention  {shape: [n_layer, n_head, T, T], dtype: "float32", data: base64 of the
//              little-endian floats} (the TypedArrayJson of wire.ts), token level
//   roles      optional: the role catalogue of GET /api/model (names and colours)
//   statistics_catalogue  optional: the catalogue of statistics of GET /api/model (labels, help
//              texts, constants); without it a statistic is labelled by its key
//   view, layer, head   what to open on (a view id of views/index.ts, "head" or "projection")

import {
  ApiClient,
  ApiError,
  type AblateResult,
  type CompositionResult,
  type Decomposition,
  type GenerateResult,
  type HeadLensResult,
  type ImportanceResult,
  type LensResult,
  type LinkResult,
  type ModelInfo,
  type PatchResult,
  type RoleInfo,
  type RunResult,
  type StatInfo,
  type TokenizeResult,
} from './api';
import { statConstants } from './statistics';
import type { Level } from './state';
import type { MapView } from './maps';
import { decodeTypedArray, numel, type Tensor, type TypedArrayJson } from './wire';

export const EMBED_SCHEMA = 'headscope.embed/1';

export interface EmbedPayload {
  schema: string;
  run: RunResult & { model?: Partial<ModelInfo> };
  attention: TypedArrayJson;
  roles?: RoleInfo[];
  statistics_catalogue?: StatInfo[];
  view?: string;
  layer?: number;
  head?: number;
}

/** Said wherever an embedded result cannot do what the served explorer does. */
export const NEEDS_MODEL =
  'needs the model: this is an embedded result (its dense attention only); open the text in `headscope serve` for it';

/** A neutral colour for roles when the payload carries no catalogue. */
const NO_CATALOGUE_COLOUR = '#777777';

/** The model description the views read, from the run's own `model` object; the role catalogue
 *  from the payload, else the role names the run's heads mention (with one neutral colour). */
export function embeddedModel(p: EmbedPayload): ModelInfo {
  const m = p.run.model ?? {};
  const [L, H, T] = p.attention.shape;
  let roles = p.roles;
  if (!roles) {
    const names = new Map<string, string>();
    for (const head of p.run.heads) for (const s of head.roles.scores) names.set(s.id, s.name);
    roles = [...names].map(([id, name]) => ({
      id,
      name,
      description: '',
      typical_function: '',
      literature: '',
      color: NO_CATALOGUE_COLOUR,
    }));
  }
  const catalogue = p.statistics_catalogue ?? m.statistics_catalogue ?? [];
  return {
    name: m.name ?? 'attention',
    architecture: m.architecture ?? '',
    n_layer: L,
    n_head: H,
    n_kv_head: m.n_kv_head ?? H,
    d_model: m.d_model ?? 0,
    d_head: m.d_head ?? 0,
    d_ff: m.d_ff ?? 0,
    vocab_size: m.vocab_size ?? 0,
    max_positions: m.max_positions ?? T,
    causal: m.causal ?? false,
    kv_head_of: m.kv_head_of ?? Array.from({ length: H }, (_, h) => h),
    window: m.window ?? [],
    w_o_shape: m.w_o_shape ?? [0, 0],
    limits: { max_text_bytes: 0, max_tokens: T },
    statistics: m.statistics ?? {
      sparsity_fraction: 0,
      cover_mass: 0,
      local_window: 0,
      max_offset: 0,
      min_role_score: 0,
      ...statConstants(catalogue),
    },
    statistics_catalogue: catalogue,
    roles,
  };
}

/** Checks the payload's pieces against each other; throws an Error naming what does not fit. */
export function checkPayload(p: EmbedPayload): void {
  if (p.schema !== EMBED_SCHEMA)
    throw new Error(`embedded payload has schema "${p.schema}", expected "${EMBED_SCHEMA}"`);
  const s = p.attention.shape;
  if (s.length !== 4 || s[2] !== s[3])
    throw new Error(`embedded attention has shape [${s.join(', ')}], expected [n_layer, n_head, T, T]`);
  if (s[2] !== p.run.n_tokens)
    throw new Error(`embedded attention has ${s[2]} positions, the run ${p.run.n_tokens} tokens`);
  if (p.run.heads.length !== s[0] * s[1])
    throw new Error(`embedded run has ${p.run.heads.length} heads, the attention ${s[0]} × ${s[1]}`);
  if (p.run.level !== 'token') throw new Error(`embedded run is at level "${p.run.level}", expected "token"`);
}

export class EmbeddedClient extends ApiClient {
  readonly modelInfo: ModelInfo;
  /** [n_layer, n_head, T, T] */
  readonly attentionAll: Tensor;

  constructor(readonly payload: EmbedPayload) {
    super();
    checkPayload(payload);
    this.modelInfo = embeddedModel(payload);
    this.attentionAll = decodeTypedArray(payload.attention);
  }

  private refuse(what: string): Promise<never> {
    return Promise.reject(new ApiError(422, 'embedded', `${what} ${NEEDS_MODEL}`));
  }

  private check(text: string, level: Level): void {
    if (text !== this.payload.run.text) throw new ApiError(422, 'embedded', `another text ${NEEDS_MODEL}`);
    if (level !== 'token') throw new ApiError(422, 'embedded', `word level ${NEEDS_MODEL}`);
  }

  override async model(): Promise<ModelInfo> {
    return this.modelInfo;
  }

  override run(text: string, level: Level, special: 'keep' | 'hide' = 'keep'): Promise<RunResult> {
    try {
      this.check(text, level);
    } catch (e) {
      return Promise.reject(e);
    }
    if (special !== 'keep') return this.refuse('hiding special tokens');
    return Promise.resolve(this.payload.run);
  }

  /** The embedded weights: one layer [1, n_head, T, T] (a view, no copy) or all. uint8 is asked
   *  for thumbnails only; the float32 values serve as they are. */
  override attention(
    text: string,
    level: Level,
    layer: number | null,
    _dtype: 'float32' | 'uint8' = 'float32',
    view: MapView = 'weights',
  ): Promise<Tensor> {
    try {
      this.check(text, level);
    } catch (e) {
      return Promise.reject(e);
    }
    if (view !== 'weights') return this.refuse(`the ${view} maps`);
    const [L, H, T] = this.attentionAll.shape;
    if (layer === null) return Promise.resolve(this.attentionAll);
    if (!Number.isInteger(layer) || layer < 0 || layer >= L)
      return Promise.reject(new ApiError(400, 'bad_layer', `layer ${layer} is outside 0 .. ${L - 1}`));
    const n = numel([H, T, T]);
    return Promise.resolve({ shape: [1, H, T, T], data: this.attentionAll.data.subarray(layer * n, (layer + 1) * n) });
  }

  override overview(..._args: unknown[]): Promise<Tensor> {
    return this.refuse('a pooled overview');
  }
  override tile(..._args: unknown[]): Promise<Tensor> {
    return this.refuse('a tile of a streamed run');
  }
  override decompose(..._args: unknown[]): Promise<Decomposition> {
    return this.refuse('the W_O decomposition');
  }
  override ablate(..._args: unknown[]): Promise<AblateResult> {
    return this.refuse('ablation');
  }
  override importance(..._args: unknown[]): Promise<ImportanceResult> {
    return this.refuse('head importance');
  }
  override generate(..._args: unknown[]): Promise<GenerateResult> {
    return this.refuse('generation');
  }
  override link(..._args: unknown[]): Promise<LinkResult> {
    return this.refuse('the links across heads');
  }
  override patch(..._args: unknown[]): Promise<PatchResult> {
    return this.refuse('activation patching');
  }
  override logitLens(..._args: unknown[]): Promise<LensResult> {
    return this.refuse('the logit lens');
  }
  override headLens(..._args: unknown[]): Promise<HeadLensResult> {
    return this.refuse('the logit lens of a head');
  }
  override tokenize(..._args: unknown[]): Promise<TokenizeResult> {
    return this.refuse('tokenising another prompt');
  }
  override composition(..._args: unknown[]): Promise<CompositionResult> {
    return this.refuse('composition scores');
  }
}
