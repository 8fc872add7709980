// "Patching": which heads carry a behaviour, measured by activation patching between a clean and
// a corrupted prompt (POST /api/patch). The user writes the two prompts (their tokens shown as they
// type, and whether the counts match), on a decoder the answer and the wrong token, picks a site and
// a direction, and runs. The result is a layer × head grid of normalised effects (layer × position
// for the residual stream, bars for whole blocks); clicking a head runs path patching from it to
// every later head through the chosen input, and gives its direct effect on the output; on a
// decoder it also shows the head's logit lens (POST /api/head_lens, head-lens.ts): what its own
// output does to the answer's and the wrong token's logits, and which tokens it raises and lowers.
//
// State: the prompts follow the explorer's text (an example pair for the default text); a new text
// clears every result, and a reply for prompts or settings that have changed since is dropped.
// The head's logit lens is dimmed, and marked as such, when the clean prompt or the answers change.
// Another view may ask for one path (state.path: the Composition view's pair of heads): it is traced
// on the prompts shown, from the sender into that one receiver through the input named.
//
// Gradients: the sweep's method is exact patching, attribution patching (every site estimated to
// first order from one backward pass; attribution-panel.ts) or both, the two maps side by side on
// one colour scale with their agreement; and the saliency panel (saliency-panel.ts) colours the
// clean prompt's tokens by how much of the metric each accounts for.

import {
  ApiError,
  type HeadLensRequest,
  type HeadLensResult,
  type LensResult,
  type ModelInfo,
  type PatchDirection,
  type PatchMethod,
  type PatchMetric,
  type PatchRequest,
  type PatchResult,
  type PatchSite,
  type PathInput,
  type SaliencyRequest,
  type SaliencyResult,
  type TokenizeResult,
} from '../../lib/api';
import { h } from '../../lib/dom';
import { download, exportName } from '../../lib/export';
import { attentionKind, headRange } from '../../lib/kv-groups';
import { signedLegend, signedLegendItems } from '../../lib/legend';
import { headTag } from '../../lib/numbering';
import type { Scene, SceneItem } from '../../lib/scene';
import { DEFAULT_TEXT, type PathRef, type ViewState } from '../../lib/state';
import { THEME } from '../../lib/theme';
import type { ExportableView, ViewContext } from '../context';
import { AttributionPanel } from './attribution-panel';
import { EffectGrid } from './effect-grid';
import { defaultAnswers, encoderEdgesLine, METHOD_LABELS, METHODS } from './gradients';
import { HeadLensPanel, type LensInputs } from './head-lens';
import {
  effectLimit,
  METRIC_LABELS,
  parseLayers,
  patchCsv,
  pathGrid,
  SITE_LABELS,
  SITES,
  sweepGrid,
  type GridCell,
  type GridColumn,
  type GridRow,
  type PatchGrid,
} from './patch-grid';
import { PromptBox } from './prompt-box';
import { SaliencyPanel } from './saliency-panel';

export interface PatchingCallbacks {
  patch(request: PatchRequest): Promise<PatchResult>;
  headLens(request: HeadLensRequest): Promise<HeadLensResult>;
  saliency(request: SaliencyRequest): Promise<SaliencyResult>;
  logitLens(text: string, position: number | null, tokens: string[], topK: number): Promise<LensResult>;
  tokenize(text: string, special: boolean): Promise<TokenizeResult>;
  change(patch: Partial<ViewState>): void;
}

interface Pair {
  clean: string;
  corrupt: string;
  answer: string;
  wrong: string;
}

/** The pair a decoder opens on: indirect object identification (Wang et al. 2022), the corrupted
 *  prompt with two other names, so that the metric asks which name the model copies. */
export const DECODER_EXAMPLE: Pair = {
  clean: 'When Mary and John went to the store, John gave a drink to',
  corrupt: 'When Alice and Bob went to the store, Bob gave a drink to',
  answer: ' Mary',
  wrong: ' John',
};
/** The pair an encoder opens on: the explorer's default sentence with the word that decides what
 *  "it" is replaced (the embedding's change is the metric). */
export const ENCODER_EXAMPLE: Pair = {
  clean: DEFAULT_TEXT,
  corrupt: "The animal didn't cross the street because it was too wide.",
  answer: '',
  wrong: '',
};

/** Sites whose grid has a query head per cell: a click there runs path patching from that head. */
const HEAD_SITES: readonly PatchSite[] = ['head', 'q', 'pattern'];

export class PatchingView implements ExportableView {
  readonly el: HTMLElement;
  private clean: PromptBox;
  private corrupt: PromptBox;
  private answer: PromptBox;
  private wrong: PromptBox;
  private answers: HTMLElement;
  private metricNote = h('p', { class: 'muted small', id: 'patch-metric-note' });
  private count = h('p', { class: 'patch-count', id: 'patch-count', 'aria-live': 'polite' });
  private site = this.select(
    'patch-site',
    'what to patch',
    SITES.map((s) => [s, SITE_LABELS[s]]),
  );
  private direction = this.select('patch-direction', 'direction', [
    ['denoise', 'denoise: clean values into the corrupted run'],
    ['noise', 'noise: corrupted values into the clean run'],
  ]);
  private metric = this.select('patch-metric', 'metric', []);
  /** Exact patching, attribution patching's estimate, or both. */
  private method = this.select(
    'patch-method',
    'method',
    METHODS.map((m) => [m, METHOD_LABELS[m]]),
  );
  /** With an estimate: also estimate every edge between heads (decoders). */
  private edgesBox = h('input', { type: 'checkbox', id: 'patch-edges-toggle' });
  private edgesControl = h(
    'label',
    { class: 'control patch-edges-control', hidden: true },
    h('span', {}, 'Edges'),
    h('span', { class: 'patch-check' }, this.edgesBox, ' also estimate edges between heads'),
  );
  private edgesNote = h('p', { class: 'muted small', id: 'patch-edges-note', hidden: true });
  private layers = h('input', {
    id: 'patch-layers',
    type: 'text',
    placeholder: 'all',
    'aria-label': 'layers to patch',
    title: 'layers to patch, counted from 1: "all", "20-30", "1, 5, 9"',
  });
  private runButton = h(
    'button',
    { type: 'button', class: 'primary', id: 'patch-run', onclick: () => void this.run() },
    'Run',
  );
  private status = h('p', { class: 'status', id: 'patch-status', 'aria-live': 'polite' });
  private result: HTMLElement;
  private summary = h('p', { id: 'patch-summary' });
  private kvNote = h('p', { class: 'muted small', id: 'patch-kv-note', hidden: true });
  private legend = h('div', { class: 'legend-row' });
  private grid = new EffectGrid({
    id: 'patch-grid',
    label: 'normalised effect of patching each site',
    describe: (row, column, cell) => this.describe(row, column, cell),
    clickable: (row, column) => this.clickable(row, column),
    onCell: (row, column) => void this.pathFrom(row.layer, (row.head ?? column.head)!),
  });
  /** The main map's title: shown when an estimate is drawn ("Exact patching", or "Estimate"). */
  private gridTitle = h('figcaption', { id: 'patch-map-exact-title', hidden: true });
  /** The estimate's note, map (both), agreement and edges. */
  private attribution = new AttributionPanel({
    where: (row, column) => this.where(row, column),
    clickable: (row, column) => this.clickable(row, column),
    onCell: (row, column) => void this.pathFrom(row.layer, (row.head ?? column.head)!),
  });
  private path: HTMLElement;
  private pathTitle = h('h3', { id: 'path-title' });
  private pathInput = this.select('path-input', 'receiver input', [
    ['q', 'queries (q)'],
    ['k', 'keys (k)'],
    ['v', 'values (v)'],
  ]);
  private pathStatus = h('p', { class: 'status', id: 'path-status', 'aria-live': 'polite' });
  private pathNote = h('p', { class: 'muted small', id: 'path-note' });
  private pathDirect = h('p', { id: 'path-direct' });
  private pathGrid = new EffectGrid({
    id: 'path-grid',
    label: 'normalised effect of the path from the selected head to each later head',
    describe: (row, column, cell) => this.describePath(row, column, cell),
  });
  private pathLinks = h('p', { class: 'path-links' });
  /** The clicked head's logit lens (decoders), on the prompts of the sweep shown. */
  private headLens = new HeadLensPanel({
    headLens: (request) => this.callbacks.headLens(request),
    current: () => this.lensInputs(),
    describeError: (e) => refusal(e),
  });
  /** Each token of the clean prompt coloured by its saliency. */
  private saliency = new SaliencyPanel({
    saliency: (request) => this.callbacks.saliency(request),
    inputs: () => ({
      text: this.clean.value,
      answer: this.answer.value,
      wrong: this.wrong.value,
      metric: this.metric.value as PatchMetric,
    }),
    fillAnswers: () => this.fillAnswers(),
    describeError: (e) => refusal(e),
  });
  private model: ModelInfo | null = null;
  /** The explorer text the prompts were last set from. */
  private text: string | null = null;
  /** Bumped by every edit and every run: a reply for an older value is dropped. */
  private generation = 0;
  private shown: { request: PatchRequest; result: PatchResult; grid: PatchGrid; limit: number } | null = null;
  private sender: { layer: number; head: number } | null = null;
  private pathShown: { result: PatchResult; grid: PatchGrid; limit: number } | null = null;
  /** The path of state.path last traced ("" for none), so that each is traced once. */
  private pathAsked = '';

  constructor(private readonly callbacks: PatchingCallbacks) {
    const box = (id: string, label: string, kind: 'prompt' | 'answer', placeholder?: string) =>
      new PromptBox({
        id,
        label,
        kind,
        placeholder,
        tokenize: (t, special) => this.callbacks.tokenize(t, special),
        edited: () => this.edited(),
        tokenized: () => this.drawCount(),
      });
    this.clean = box('patch-clean', 'Clean prompt (the model shows the behaviour)', 'prompt');
    this.corrupt = box('patch-corrupt', 'Corrupted prompt (same number of tokens, the clue replaced)', 'prompt');
    this.answer = box('patch-answer', 'Answer token', 'answer', 'e.g. " Mary"');
    this.wrong = box('patch-wrong', 'Wrong token', 'answer', 'e.g. " John"');
    this.answers = h('div', { class: 'patch-answers' }, this.answer.el, this.wrong.el);
    this.layers.addEventListener('input', () => this.edited());
    this.method.addEventListener('change', () => this.drawMethodControls());
    this.edgesBox.addEventListener('change', () => this.edited());
    this.result = this.resultSection();
    this.path = this.pathSection();
    this.el = h(
      'section',
      { class: 'view patching-view', 'aria-labelledby': 'patching-title' },
      h(
        'div',
        { class: 'view-head' },
        h('h2', { id: 'patching-title' }, 'Activation patching: which heads carry the behaviour?'),
      ),
      h(
        'p',
        { class: 'muted' },
        'Run the model on a clean prompt and on a corrupted one that differs only in the clue. Then copy one activation — a head’s output, say — from one run into the other and see how much of the clean behaviour comes back. A head whose output alone restores much of it carries the information.',
      ),
      this.clean.el,
      this.corrupt.el,
      this.count,
      this.answers,
      this.metricNote,
      this.controls(),
      this.edgesNote,
      this.status,
      this.result,
      this.headLens.el,
      this.path,
      this.saliency.el,
    );
  }

  /** The row of sweep settings and buttons. */
  private controls(): HTMLElement {
    return h(
      'div',
      { class: 'patch-controls', id: 'patch-controls' },
      h('label', { class: 'control' }, h('span', {}, 'Patch'), this.site),
      h('label', { class: 'control' }, h('span', {}, 'Direction'), this.direction),
      h('label', { class: 'control', id: 'patch-metric-control' }, h('span', {}, 'Metric'), this.metric),
      h('label', { class: 'control' }, h('span', {}, 'Layers'), this.layers),
      h('label', { class: 'control' }, h('span', {}, 'Method'), this.method),
      this.edgesControl,
      this.runButton,
      h(
        'button',
        { type: 'button', class: 'ghost', id: 'patch-example', onclick: () => this.loadExample() },
        'Example pair',
      ),
    );
  }

  /** The sweep's result: summary, notes, legend, the map (and the estimate's beside it), downloads. */
  private resultSection(): HTMLElement {
    return h(
      'div',
      { class: 'patch-result', id: 'patch-result', hidden: true },
      this.summary,
      this.kvNote,
      this.attribution.note,
      this.legend,
      h(
        'div',
        { class: 'patch-maps' },
        h(
          'figure',
          { class: 'patch-map', id: 'patch-map-exact' },
          this.gridTitle,
          h('div', { class: 'scroll-x' }, this.grid.el),
        ),
        this.attribution.estimate,
      ),
      this.attribution.agreement,
      this.attribution.edges,
      h(
        'div',
        { class: 'patch-downloads' },
        h(
          'button',
          { type: 'button', class: 'ghost', id: 'patch-json', onclick: () => this.download('json') },
          'Download JSON',
        ),
        h(
          'button',
          { type: 'button', class: 'ghost', id: 'patch-csv', onclick: () => this.download('csv') },
          'Download CSV',
        ),
      ),
    );
  }

  /** Path patching from a clicked head: its title, the receiver input, the grid and links. */
  private pathSection(): HTMLElement {
    this.pathInput.addEventListener(
      'change',
      () => this.sender && void this.pathFrom(this.sender.layer, this.sender.head),
    );
    return h(
      'div',
      { class: 'patch-path', id: 'patch-path', hidden: true },
      this.pathTitle,
      h(
        'p',
        { class: 'muted small' },
        'Path patching: the head’s output is patched as the sweep patched it, every other head and feed-forward block is frozen at the run’s own values, and only the chosen input of each later head sees the change. A cell is the share of the behaviour that passes along that one path.',
      ),
      h(
        'div',
        { class: 'patch-controls' },
        h('label', { class: 'control' }, h('span', {}, 'Receiver input'), this.pathInput),
      ),
      this.pathNote,
      this.pathStatus,
      this.pathDirect,
      h('div', { class: 'scroll-x' }, this.pathGrid.el),
      this.pathLinks,
    );
  }

  /** The edges switch shows with an estimate; an encoder gets it disabled, with the reason. */
  private drawMethodControls(): void {
    const m = this.model;
    const estimate = this.method.value !== 'exact';
    this.edgesControl.hidden = !estimate;
    this.edgesBox.disabled = !m?.causal;
    if (!m?.causal) this.edgesBox.checked = false;
    this.edgesNote.hidden = !estimate || !m || m.causal;
    this.edgesNote.textContent = m && !m.causal ? encoderEdgesLine(m.name) : '';
    this.edited();
  }

  private clickable(row: GridRow, column: GridColumn): boolean {
    return HEAD_SITES.includes(this.shownSite()) && (row.head ?? column.head) !== undefined;
  }

  private select(id: string, label: string, options: [string, string][]): HTMLSelectElement {
    const s = h('select', { id, 'aria-label': label }, ...options.map(([v, t]) => h('option', { value: v }, t)));
    s.addEventListener('change', () => this.edited());
    return s;
  }

  /** Follows the explorer: the model's controls once, and the prompts whenever the text changes. */
  update(ctx: ViewContext): void {
    if (this.model !== ctx.model) this.setModel(ctx.model);
    const text = ctx.state.text;
    // A link from this view sets the text to the clean prompt: nothing to reset then.
    if (text !== this.text && !(text === this.clean.value && this.shown)) {
      const example = ctx.model.causal ? DECODER_EXAMPLE : ENCODER_EXAMPLE;
      this.setPair(text === DEFAULT_TEXT ? example : { clean: text, corrupt: text, answer: '', wrong: '' });
    }
    this.text = text;
    const asked = ctx.state.path;
    const key = asked ? JSON.stringify(asked) : '';
    if (key === this.pathAsked) return;
    this.pathAsked = key;
    if (asked) void this.tracePath(asked);
  }

  private setModel(model: ModelInfo): void {
    this.model = model;
    this.answers.hidden = !model.causal;
    const metrics: PatchMetric[] = model.causal ? ['logit_diff', 'prob', 'loss'] : ['cosine'];
    this.metric.replaceChildren(...metrics.map((m) => h('option', { value: m }, METRIC_LABELS[m])));
    this.metric.disabled = !model.causal;
    this.metricNote.textContent = model.causal
      ? 'The metric is read at the last position: how much the model prefers the answer token to the wrong one.'
      : `${model.name} is an encoder: it predicts no next token, so the metric is 1 − cos between the sentence embedding (the mean of the last layer) and the clean prompt's. No answer tokens are needed.`;
    this.shown = null;
    this.clearPath();
    this.attribution.clear();
    this.result.hidden = true;
    this.saliency.setModel(model);
    this.drawMethodControls();
  }

  /** The user moved on from a path another view asked for: it leaves the state (and the URL), so
   *  that asking for the same path again traces it again. Called from click handlers only. */
  private forgetAskedPath(): void {
    if (this.pathAsked) this.callbacks.change({ path: null });
  }

  private loadExample(): void {
    this.forgetAskedPath();
    if (this.model) this.setPair(this.model.causal ? DECODER_EXAMPLE : ENCODER_EXAMPLE);
  }

  private setPair(p: Pair): void {
    this.clean.set(p.clean);
    this.corrupt.set(p.corrupt);
    this.answer.set(p.answer);
    this.wrong.set(p.wrong);
    this.shown = null;
    this.result.hidden = true;
    this.clearPath();
    this.attribution.clear();
    this.saliency.clear();
    this.saliency.setReference(p.corrupt);
    this.edited();
  }

  /** Saliency on a decoder with an empty answer box: the model's two likeliest next tokens after
   *  the clean prompt fill the empty boxes (the logit lens's last row is the model's output). */
  private async fillAnswers(): Promise<{ answer: string; wrong: string } | string> {
    const text = this.clean.value;
    if (text.trim() === '') return 'Write a clean prompt first.';
    const lens = await this.callbacks.logitLens(text, null, [], 3);
    const top = lens.layers[lens.layers.length - 1]?.top.map((t) => t.text) ?? [];
    const pair = defaultAnswers(this.answer.value, this.wrong.value, top);
    if (pair.answer === '' || pair.wrong === '') return 'The model gave no next tokens to fill the answer boxes with.';
    if (this.clean.value !== text)
      return 'The clean prompt changed while its next tokens were read: press the button again.';
    this.answer.set(pair.answer);
    this.wrong.set(pair.wrong);
    this.edited();
    return pair;
  }

  /** Any edit: replies on their way are for the old values; shown results say they are out of date. */
  private edited(): void {
    this.generation++;
    this.drawCount();
    this.headLens.check();
    this.saliency.check();
    if (this.shown) {
      this.result.classList.add('stale');
      this.status.className = 'status';
      this.status.textContent = 'The prompts or settings changed since this result: Run again to update it.';
    }
  }

  private drawCount(): void {
    const a = this.clean.tokens?.n_tokens,
      b = this.corrupt.tokens?.n_tokens;
    if (a === undefined || b === undefined) {
      this.count.removeAttribute('data-match');
      this.count.textContent = '';
      return;
    }
    this.count.setAttribute('data-match', String(a === b));
    this.count.className = `patch-count ${a === b ? 'ok' : 'bad'}`;
    this.count.textContent =
      a === b
        ? `Both prompts are ${a} tokens ✓`
        : `The clean prompt is ${a} tokens and the corrupted one ${b}. Patching copies activations position by position, so both need the same number of tokens: change a word of the corrupted prompt for one of the same length in tokens.`;
  }

  /** What a head's logit lens reads: the clean prompt in the box and the answer pair. */
  private lensInputs(): LensInputs {
    return { text: this.clean.value, tokens: [this.answer.value, this.wrong.value] };
  }

  private shownSite(): PatchSite {
    return (this.shown?.request.sites?.[0] ?? 'head') as PatchSite;
  }

  private request(): PatchRequest | string {
    const m = this.model!;
    const layers = parseLayers(this.layers.value, m.n_layer);
    if (typeof layers === 'string') return `Layers: ${layers}.`;
    const r: PatchRequest = {
      clean: this.clean.value,
      corrupt: this.corrupt.value,
      sites: [this.site.value as PatchSite],
      direction: this.direction.value as PatchDirection,
      metric: this.metric.value as PatchMetric,
    };
    if (m.causal) Object.assign(r, { answer: this.answer.value, wrong: this.wrong.value });
    if (layers.length) r.layers = layers;
    const method = this.method.value as PatchMethod;
    if (method !== 'exact') r.method = method;
    if (method !== 'exact' && m.causal && this.edgesBox.checked) r.edges = true;
    return r;
  }

  private async run(): Promise<void> {
    if (!this.model) return;
    const request = this.request();
    if (typeof request === 'string') return this.fail(this.status, request);
    const gen = ++this.generation;
    this.runButton.disabled = true;
    this.status.className = 'status';
    this.status.textContent = `${request.method === 'attribution' ? 'Estimating' : 'Patching'} ${SITE_LABELS[request.sites![0]]}…`;
    this.el.setAttribute('data-state', 'running');
    try {
      const result = await this.callbacks.patch(request);
      if (gen !== this.generation) return;
      this.show(request, result);
      this.el.setAttribute('data-state', 'ready');
    } catch (e) {
      if (gen !== this.generation) return;
      this.fail(this.status, refusal(e));
      this.el.setAttribute('data-state', 'error');
    } finally {
      this.runButton.disabled = false;
    }
  }

  private fail(where: HTMLElement, message: string): void {
    where.className = 'status error';
    where.textContent = message;
  }

  private show(request: PatchRequest, result: PatchResult): void {
    this.forgetAskedPath();
    const m = this.model!;
    const site = request.sites![0];
    const tokens = this.clean.tokens?.tokens.map((t) => t.display ?? t.text) ?? [];
    const method = result.method ?? 'exact';
    const grid = sweepGrid(result, site, m, tokens);
    // Both: the estimate's map beside the exact one, on one colour scale.
    const estimate =
      method === 'both' && result.attribution
        ? sweepGrid({ ...result, results: result.attribution.results }, site, m, tokens)
        : null;
    const limit = effectLimit([...grid.cells, ...(estimate?.cells ?? [])]);
    this.shown = { request, result, grid, limit };
    this.clearPath();
    this.result.hidden = false;
    this.result.classList.remove('stale');
    this.result.setAttribute('data-site', site);
    this.status.className = 'status';
    this.status.textContent = HEAD_SITES.includes(site)
      ? `Click a head to trace where its effect goes (path patching)${m.causal ? ' and to read its logit lens' : ''}.`
      : '';
    this.summary.textContent = sweepSummary(result);
    const groups = m.n_kv_head < m.n_head;
    this.kvNote.hidden = !((site === 'k' || site === 'v') && groups);
    this.kvNote.textContent = `${m.name} shares each key/value head among ${m.n_head / m.n_kv_head} query heads (${attentionKind(m)}): patching a key or value head changes it for its whole group of query heads, so each column is one key/value head and names the heads that read it.`;
    this.legend.replaceChildren(
      signedLegend(
        limit,
        `${method === 'exact' ? '' : method === 'both' ? 'both maps: ' : 'estimated '}normalised effect (red: towards the corrupted behaviour, blue: towards the clean one)`,
      ),
    );
    this.gridTitle.hidden = method === 'exact';
    this.gridTitle.textContent = method === 'both' ? 'Exact patching' : 'Estimate (attribution patching)';
    this.result.setAttribute('data-method', method);
    this.grid.update(grid, limit);
    this.attribution.show(result, method, estimate, limit, request.edges === true);
  }

  /** A cell's place in words: "Layer 30 · H2", with the query heads of a key/value head. */
  private where(row: GridRow, column: GridColumn): string {
    return [
      row.label,
      column.group
        ? `KV head ${column.head! + 1}, read by ${headRange(column.group)} (patched for the whole group)`
        : column.label,
      column.position !== undefined ? `position ${column.position}` : '',
    ]
      .filter(Boolean)
      .join(' · ');
  }

  private describe(row: GridRow, column: GridColumn, cell: GridCell | null): string[] {
    const r = this.shown?.result;
    const where = this.where(row, column);
    const est = r?.method === 'attribution' ? 'estimated ' : '';
    if (!cell) return [where, 'not patched (outside the layers asked for)'];
    return [
      where,
      `${est}normalised effect ${num(cell.normalised)}`,
      `${est}${r ? METRIC_LABELS[r.metric] : 'metric'} ${num(cell.value)} (clean ${num(r?.clean)}, corrupted ${num(r?.corrupt)})`,
    ];
  }

  private describePath(row: GridRow, column: GridColumn, cell: GridCell | null): string[] {
    const s = this.sender;
    const name = `${row.label} ${column.label}`;
    if (!cell) return [name, s && row.layer <= s.layer ? 'not a receiver: not after the sender' : 'not measured'];
    return [
      name,
      `normalised effect through its ${this.pathInput.value} ${num(cell.normalised)}`,
      `metric ${num(cell.value)}`,
    ];
  }

  private clearPath(): void {
    this.sender = null;
    this.pathShown = null;
    this.path.hidden = true;
    this.pathGrid.clear();
    this.headLens.clear();
  }

  /** Path patching from (layer, head) to every later head through the chosen input, and to the logits. */
  private async pathFrom(layer: number, head: number): Promise<void> {
    const shown = this.shown,
      m = this.model;
    if (!shown || !m) return;
    this.forgetAskedPath();
    this.sender = { layer, head };
    this.grid.update(shown.grid, shown.limit, this.sender);
    this.attribution.select(this.sender);
    const r = shown.request;
    void this.headLens.show(m, { text: r.clean, tokens: [r.answer ?? '', r.wrong ?? ''] }, layer, head);
    const input = this.pathInput.value as PathInput;
    const base: PatchRequest = { ...shown.request, senders: [[layer, head]] };
    delete base.sites;
    delete base.layers;
    delete base.method;
    delete base.edges;
    const gen = this.generation;
    this.path.hidden = false;
    this.path.setAttribute('data-state', 'running');
    this.pathTitle.textContent = `Path patching from ${headTag(layer, head)} (index ${layer}.${head})`;
    this.pathNote.textContent =
      input !== 'q' && m.n_kv_head < m.n_head
        ? `Keys and values are shared by each group of ${m.n_head / m.n_kv_head} query heads: patching a receiver's ${input === 'k' ? 'keys' : 'values'} patches them for its whole group.`
        : '';
    this.pathStatus.className = 'status';
    this.pathStatus.textContent =
      layer === m.n_layer - 1
        ? 'No head comes after the last layer: only the direct effect on the output is measured.'
        : 'Tracing…';
    this.pathDirect.textContent = '';
    this.pathGrid.clear();
    this.drawPathLinks(layer, head);
    try {
      const [direct, paths] = await Promise.all([
        this.callbacks.patch({ ...base, input: 'logits' }),
        layer < m.n_layer - 1 ? this.callbacks.patch({ ...base, input }) : Promise.resolve(null),
      ]);
      if (
        gen !== this.generation ||
        this.sender?.layer !== layer ||
        this.sender.head !== head ||
        this.pathInput.value !== input
      )
        return;
      this.pathDirect.textContent = `Direct effect on the output (the head alone, everything after it frozen): normalised ${num(direct.path?.normalised)} (${METRIC_LABELS[direct.metric]} ${num(direct.path?.value)}).`;
      if (paths) {
        const grid = pathGrid(paths, m);
        const limit = effectLimit(grid.cells);
        this.pathShown = { result: paths, grid, limit };
        this.pathGrid.update(grid, limit);
        this.pathStatus.textContent = `${paths.path?.results.length} receivers, one patched run each.`;
      }
      this.path.setAttribute('data-state', 'ready');
    } catch (e) {
      if (gen !== this.generation) return;
      this.fail(this.pathStatus, refusal(e));
      this.path.setAttribute('data-state', 'error');
    }
  }

  /** Path patching from one sender into one receiver through its q, k or v, on the prompts shown
   *  (asked for by another view: state.path). */
  private async tracePath(p: PathRef): Promise<void> {
    const m = this.model;
    if (!m) return;
    const request = this.request();
    this.clearPath();
    this.path.hidden = false;
    this.sender = p.sender;
    this.pathInput.value = p.input;
    const from = headTag(p.sender.layer, p.sender.head),
      to = headTag(p.receiver.layer, p.receiver.head);
    const input = { q: 'queries', k: 'keys', v: 'values' }[p.input];
    this.pathTitle.textContent = `Path patching from ${from} into ${to} through its ${input} (index ${p.sender.layer}.${p.sender.head} → ${p.receiver.layer}.${p.receiver.head})`;
    this.pathNote.textContent =
      p.input !== 'q' && m.n_kv_head < m.n_head
        ? `Keys and values are shared by each group of ${m.n_head / m.n_kv_head} query heads: patching ${to}'s ${input} patches them for its whole group.`
        : '';
    this.drawPathLinks(p.sender.layer, p.sender.head);
    if (typeof request === 'string') return this.fail(this.pathStatus, request);
    const gen = this.generation;
    this.path.setAttribute('data-state', 'running');
    this.pathStatus.className = 'status';
    this.pathStatus.textContent = 'Tracing this one path on the prompts above…';
    const base: PatchRequest = { ...request, senders: [[p.sender.layer, p.sender.head]] };
    delete base.sites;
    delete base.layers;
    delete base.method;
    delete base.edges;
    try {
      const r = await this.callbacks.patch({
        ...base,
        receivers: [[p.receiver.layer, p.receiver.head]],
        input: p.input,
      });
      if (gen !== this.generation) return;
      const grid = pathGrid(r, m);
      const limit = effectLimit(grid.cells);
      this.pathShown = { result: r, grid, limit };
      this.pathGrid.update(grid, limit, p.receiver);
      this.pathDirect.textContent = `The path ${from} → ${to} alone: normalised ${num(r.path?.normalised)} (${METRIC_LABELS[r.metric]} ${num(r.path?.value)}; clean ${num(r.clean)}, corrupted ${num(r.corrupt)}).`;
      this.pathStatus.textContent = `Run the sweep and click ${from} to trace every path from it.`;
      this.path.setAttribute('data-state', 'ready');
    } catch (e) {
      if (gen !== this.generation) return;
      this.fail(this.pathStatus, refusal(e));
      this.path.setAttribute('data-state', 'error');
    }
  }

  private drawPathLinks(layer: number, head: number): void {
    const m = this.model!;
    const clean = this.clean.value;
    this.pathLinks.replaceChildren(
      h(
        'button',
        {
          type: 'button',
          class: 'ghost',
          id: 'path-select-head',
          onclick: () => this.callbacks.change({ text: clean, layer, head }),
        },
        `Open ${headTag(layer, head)} on the clean prompt`,
      ),
      ...(m.causal
        ? [
            h(
              'button',
              {
                type: 'button',
                class: 'ghost',
                id: 'path-logit-lens',
                onclick: () => this.callbacks.change({ text: clean, layer, head, view: 'lens' }),
              },
              `Logit lens of the clean prompt (after ${headTag(layer, head).split(' ')[0]})`,
            ),
          ]
        : []),
    );
  }

  private download(format: 'json' | 'csv'): void {
    const r = this.shown?.result;
    if (!r || !this.model) return;
    const name = exportName([this.model.name, 'patch', this.shownSite(), r.direction], format);
    if (format === 'json')
      download(JSON.stringify({ request: this.shown!.request, ...r }, null, 2), name, 'application/json');
    else download(patchCsv(r, this.model.name, this.shown!.request.clean ?? ''), name, 'text/csv');
  }

  exportParts(): (string | number)[] {
    return [
      'patch',
      this.shownSite(),
      ...(this.sender ? [`path-layer${this.sender.layer + 1}-head${this.sender.head + 1}`] : []),
    ];
  }

  scene(): Scene | null {
    const s = this.shown;
    if (!s) return null;
    const items: SceneItem[] = [
      { kind: 'text', x: 16, y: 22, text: this.summary.textContent ?? '', size: 11, fill: THEME.text },
    ];
    const main = this.grid.sceneItems(16, 36);
    items.push(...main.items);
    // Both: the estimate's map to the right of the exact one, its title above it.
    const estimate = this.attribution.sceneItems(16 + main.width + 32, 16);
    items.push(...estimate.items);
    let y = 36 + Math.max(main.height, estimate.height - 20) + 16;
    items.push(...signedLegendItems(16, y, 260, s.limit, 'normalised effect', THEME.text));
    y += 56;
    let width = main.width + 32 + (estimate.width ? estimate.width + 32 : 0);
    if (this.pathShown) {
      items.push({
        kind: 'text',
        x: 16,
        y: y + 12,
        text: this.pathTitle.textContent ?? '',
        size: 12,
        fill: THEME.text,
        weight: 'bold',
      });
      const path = this.pathGrid.sceneItems(16, y + 20);
      items.push(...path.items);
      y += 20 + path.height + 16;
      width = Math.max(width, path.width + 32);
    }
    return { width: Math.max(width, 420), height: y, background: THEME.panel, items };
  }
}

/** The sweep's summary line: the metric of the two runs, the method's cost, what the colour means. */
export function sweepSummary(result: PatchResult): string {
  const a = result.attribution;
  const method = result.method ?? 'exact';
  const estimate = a
    ? `${a.forward_passes} forward and ${a.backward_passes} backward ${a.backward_passes === 1 ? 'pass' : 'passes'} in ${a.seconds.wall.toFixed(2)} s`
    : '';
  const cost =
    method === 'attribution' && a
      ? `estimated from ${estimate}`
      : method === 'both' && a
        ? `exact: ${result.passes} patched runs in ${result.seconds.wall.toFixed(1)} s; estimate: ${estimate}`
        : `${result.passes} patched runs in ${result.seconds.wall.toFixed(1)} s`;
  return `${METRIC_LABELS[result.metric]}: clean ${num(result.clean)}, corrupted ${num(result.corrupt)} · ${result.direction} · ${cost}. Colour: (patched − corrupted) / (clean − corrupted), 1 = the clean behaviour, 0 = the corrupted one.`;
}

function num(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  return Math.abs(v) >= 100 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(2) : v.toFixed(3);
}

/** A refusal of the server in the reader's terms: what was wrong and what to change. */
export function refusal(e: unknown): string {
  if (!(e instanceof ApiError)) return `Cannot reach the headscope server: ${(e as Error).message}`;
  switch (e.code) {
    case 'bad_pair':
      return `This pair cannot be patched: ${e.message.replace(/^prompt pair 1 \("[^]*?"\): /, '')}`;
    case 'bad_field': {
      // Saliency names its one text as a prompt pair: the prompt is in the box above.
      const m = /^prompt pair 1 \("[^]*?"\): (.)/.exec(e.message);
      return m ? m[1].toUpperCase() + e.message.slice(m[0].length) : e.message;
    }
    case 'too_much_work':
      return `This would take too long here: ${e.message}`;
    case 'missing_field':
      return `Something is missing: ${e.message}`;
    default:
      return e.message;
  }
}
