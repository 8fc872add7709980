// "Composition": which heads can read what earlier heads write, from the weights alone
// (POST /api/composition; Elhage et al. 2021, docs/circuits.md "Composition scores"). No text is
// involved: the scores are a property of the model, computed once by the server.
//
// The picture is one square grid of heads (n_layer · n_head per side, layer-major): rows are
// senders, columns receivers, a block per pair of layers with its boundaries drawn; only the
// blocks right of the diagonal (receiver in a later layer) can hold a score, the others are grey.
// A selector picks the kind (Q, K or V: which input of the receiver reads the sender's output);
// the colour scale starts at the random baseline's mean (random heads of the same shapes), so
// that a coloured cell is a pair the weights favour over chance. Hovering a cell names the pair
// and its numbers; clicking one selects it, and from there the Patching view traces that path on
// a prompt pair, or the Compare view shows the two heads' attention on the explorer's text.

import { attentionKind } from '../../lib/kv-groups';
import { sentenceCase } from '../../lib/format';
import { ApiError, type CompositionKind, type CompositionPair, type CompositionResult } from '../../lib/api';
import { SEQUENTIAL } from '../../lib/colour';
import { canvasPoint, h, hideTooltip, pointerKind, showTooltip, sizeCanvas } from '../../lib/dom';
import { download, exportName } from '../../lib/export';
import { pixelsCanvas } from '../../lib/heatmap';
import { layerName } from '../../lib/numbering';
import type { Pixels, Scene, SceneItem } from '../../lib/scene';
import type { ViewState } from '../../lib/state';
import { THEME } from '../../lib/theme';
import type { ExportableView, ViewContext } from '../context';
import {
  againstBaseline,
  compositionCsv,
  compositionGrid,
  compositionPixels,
  describeCell,
  hasPath,
  headAt,
  KIND_INPUT,
  KIND_LABELS,
  KINDS,
  NO_PATH_COLOUR,
  pairIndex,
  pairName,
  score3,
  type CompositionGrid,
} from './composition-grid';

/** Pairs listed per kind (the server ranks them). */
export const COMPOSITION_TOP = 20;
/** The grid's target width in CSS pixels; each head gets a whole number of pixels (2 at least). */
const GRID_TARGET = 820;
/** Room for the layer labels left of and above the grid. */
const MARGIN = 34;

export interface CompositionCallbacks {
  composition(request: { gains: boolean; top: number }): Promise<CompositionResult>;
  change(patch: Partial<ViewState>): void;
}

type Pair = { sender: { layer: number; head: number }; receiver: { layer: number; head: number } };

export class CompositionView implements ExportableView {
  readonly el: HTMLElement;
  private kind: HTMLSelectElement;
  private gains: HTMLInputElement;
  private status: HTMLElement;
  private notes: HTMLElement;
  private legend: HTMLElement;
  private canvas: HTMLCanvasElement;
  private body: HTMLElement;
  private top: HTMLOListElement;
  private selectedBox: HTMLElement;
  private ctx: ViewContext | null = null;
  private result: CompositionResult | null = null;
  private grid: CompositionGrid | null = null;
  private image: { kind: CompositionKind; pixels: Pixels; canvas: HTMLCanvasElement } | null = null;
  private selected: Pair | null = null;
  /** The model and gains the shown scores belong to. */
  private shownFor: string | null = null;
  private generation = 0;
  /** The pixels per head of the grid as last drawn. */
  private drawnCell = 1;

  constructor(private readonly callbacks: CompositionCallbacks) {
    this.kind = h(
      'select',
      { id: 'composition-kind', 'aria-label': 'kind of composition' },
      ...KINDS.map((k) => h('option', { value: k }, KIND_LABELS[k])),
    );
    this.kind.addEventListener('change', () => this.draw());
    this.gains = h('input', { type: 'checkbox', id: 'composition-gains', checked: true });
    this.gains.addEventListener('change', () => void this.refresh());
    this.status = h('p', { class: 'status', id: 'composition-status', 'aria-live': 'polite' });
    this.notes = h('ul', { class: 'composition-notes muted small', id: 'composition-notes' });
    this.legend = h('div', { class: 'legend-row', id: 'composition-legend' });
    this.canvas = h('canvas', { id: 'composition-grid', role: 'img', 'aria-label': 'composition scores' });
    this.wireCanvas();
    window.addEventListener('resize', () => {
      if (this.grid && !this.body.hidden && this.cellPixels() !== this.drawnCell) this.drawCanvas(this.kindShown());
    });
    this.top = h('ol', { class: 'composition-top', id: 'composition-top' });
    this.selectedBox = h('div', { class: 'composition-selected', id: 'composition-selected', hidden: true });
    this.body = h(
      'div',
      { class: 'composition-body', hidden: true },
      this.legend,
      h(
        'p',
        { class: 'muted small' },
        'Rows: the sender heads (they write into the residual stream). Columns: the receiver heads (they read it). Each block is one layer against another; a head can only read heads of earlier layers, so only the blocks right of the diagonal hold scores.',
      ),
      h(
        'div',
        { class: 'composition-layout' },
        h('div', { class: 'composition-canvas scroll-x' }, this.canvas),
        h(
          'div',
          { class: 'composition-side' },
          h('h3', {}, 'Highest pairs'),
          this.top,
          this.selectedBox,
          h(
            'div',
            { class: 'composition-downloads' },
            h(
              'button',
              { type: 'button', class: 'ghost', id: 'composition-json', onclick: () => this.download('json') },
              'Download JSON',
            ),
            h(
              'button',
              { type: 'button', class: 'ghost', id: 'composition-csv', onclick: () => this.download('csv') },
              'Download CSV',
            ),
          ),
        ),
      ),
    );
    this.el = h(
      'section',
      { class: 'view composition-view', 'aria-labelledby': 'composition-title' },
      h(
        'div',
        { class: 'view-head' },
        h('h2', { id: 'composition-title' }, 'Composition: which heads can read what earlier heads write'),
      ),
      h(
        'p',
        { class: 'muted' },
        'A head writes its output into the residual stream; a head of a later layer reads that stream through its queries, keys and values. Composition measures, from the weights alone and without any text, how much of what one head writes lands in the directions another head reads: 0 when they never meet, 1 when the receiver reads exactly what the sender writes. Random heads of the same shapes score a small baseline, so the colour starts there.',
      ),
      h(
        'div',
        { class: 'composition-controls' },
        h('label', { class: 'control' }, h('span', {}, 'Kind'), this.kind),
        h(
          'label',
          { class: 'control inline', title: 'off: the weights as stored, every norm gain left out' },
          this.gains,
          h('span', {}, 'Norm gains folded in (the model as it runs)'),
        ),
      ),
      this.notes,
      this.status,
      this.body,
    );
  }

  private wireCanvas(): void {
    const pointer = pointerKind(this.canvas);
    this.canvas.addEventListener('mousemove', (e) => {
      const cell = this.cellAt(e);
      if (!cell || !this.grid || !this.result) return hideTooltip();
      const lines = describeCell(this.grid, this.result, this.kindShown(), cell.i, cell.j, this.kvGroup());
      if (pointer() !== 'touch') showTooltip(e.clientX, e.clientY, lines);
    });
    this.canvas.addEventListener('mouseleave', () => hideTooltip());
    this.canvas.addEventListener('click', (e) => {
      const cell = this.cellAt(e);
      if (!cell || !this.grid || !this.result) return;
      // Touch has no hover: a tap shows the numbers and selects the pair.
      if (pointer() === 'touch')
        showTooltip(
          e.clientX,
          e.clientY,
          describeCell(this.grid, this.result, this.kindShown(), cell.i, cell.j, this.kvGroup()),
        );
      if (hasPath(cell.i, cell.j, this.grid.nHead))
        this.select({ sender: headAt(cell.i, this.grid.nHead), receiver: headAt(cell.j, this.grid.nHead) });
    });
  }

  /** The model's scores once per model and gains setting (the server keeps them too). */
  async update(ctx: ViewContext): Promise<void> {
    this.ctx = ctx;
    this.notes.replaceChildren(...this.noteItems(ctx));
    if (this.shownFor !== this.key()) await this.refresh();
  }

  private key(): string {
    return `${this.ctx?.model.name}|${this.gains.checked}`;
  }

  private async refresh(): Promise<void> {
    const ctx = this.ctx;
    if (!ctx) return;
    const gen = ++this.generation;
    const key = this.key();
    this.status.className = 'status';
    this.status.textContent = `Computing the scores of ${ctx.model.n_layer * ctx.model.n_head} heads from the weights…`;
    this.el.setAttribute('data-state', 'running');
    try {
      const r = await this.callbacks.composition({ gains: this.gains.checked, top: COMPOSITION_TOP });
      if (gen !== this.generation) return;
      this.result = r;
      this.grid = compositionGrid(r);
      this.image = null;
      this.shownFor = key;
      this.status.textContent = `${r.cached ? 'Kept by the server; computed' : 'Computed'} from the weights in ${r.seconds.scores.toFixed(1)} s (the baseline: ${r.baseline.draws} random draws, ${r.seconds.baseline.toFixed(1)} s).`;
      this.body.hidden = false;
      this.draw();
      this.el.setAttribute('data-state', 'ready');
    } catch (e) {
      if (gen !== this.generation) return;
      this.body.hidden = true;
      this.status.className = 'status error';
      this.status.textContent =
        e instanceof ApiError ? e.message : `Cannot reach the headscope server: ${(e as Error).message}`;
      this.el.setAttribute('data-state', 'error');
    }
  }

  private noteItems(ctx: ViewContext): HTMLElement[] {
    const m = ctx.model;
    const group = m.n_head / m.n_kv_head;
    return [
      h(
        'li',
        { id: 'composition-rope' },
        'Rotary position embeddings (RoPE), where the model has them, are not included: the query–key product is taken at relative position 0, while at any other distance RoPE rotates it.',
      ),
      m.n_kv_head < m.n_head
        ? h(
            'li',
            { id: 'composition-gqa' },
            `${sentenceCase(attentionKind(m))}: ${m.name}'s ${m.n_head} query heads per layer share ${m.n_kv_head} key/value heads, so each group of ${group} heads shares one W_K and W_V. K- and V-composition into the heads of one group then differ only through each head's own W_Q (K) or W_O (V).`,
          )
        : null,
      h(
        'li',
        { id: 'composition-norms' },
        m.causal
          ? 'Biases and the norms’ division by the stream’s size are left out (a score does not depend on scale); with the box ticked, each norm’s gain is folded into the matrix next to it.'
          : `Biases and the norms’ division by the stream’s size are left out (a score does not depend on scale). ${m.name} is a post-norm encoder: no norm gain sits in front of a head’s input or after its output (the norm after each block rescales the whole stream), so the box changes nothing here.`,
      ),
    ].filter((x): x is HTMLLIElement => x !== null);
  }

  private kindShown(): CompositionKind {
    return this.kind.value as CompositionKind;
  }

  private kvGroup(): number {
    const m = this.ctx?.model;
    return m ? m.n_head / m.n_kv_head : 1;
  }

  /** Pixels per head: a whole number, so that every head is as wide as the next, and the grid as
   *  large as GRID_TARGET allows without being wider than the view (one pixel per head at least:
   *  SmolLM2's 270 heads on a phone). The canvas is then shown at the size it is drawn, so that a
   *  pointer's pixel is one head. */
  private cellPixels(): number {
    const n = this.grid?.n ?? 1;
    const room = (this.body.clientWidth || GRID_TARGET + MARGIN) - MARGIN - 2;
    return Math.max(1, Math.min(Math.floor(GRID_TARGET / n), Math.floor(room / n)));
  }

  private cellAt(e: MouseEvent): { i: number; j: number } | null {
    const g = this.grid;
    if (!g) return null;
    const p = canvasPoint(this.canvas, e);
    const cell = this.drawnCell;
    const i = Math.floor((p.y - MARGIN) / cell),
      j = Math.floor((p.x - MARGIN) / cell);
    return i >= 0 && j >= 0 && i < g.n && j < g.n ? { i, j } : null;
  }

  private draw(): void {
    const g = this.grid,
      r = this.result;
    if (!g || !r) return;
    const kind = this.kindShown();
    if (this.image?.kind !== kind) {
      const pixels = compositionPixels(g, kind, r.baseline[kind].mean);
      this.image = { kind, pixels, canvas: pixelsCanvas(pixels) };
    }
    this.drawCanvas(kind);
    this.drawLegend(kind);
    this.drawTop(r.top[kind], kind);
    this.drawSelected();
  }

  private drawCanvas(kind: CompositionKind): void {
    const g = this.grid!;
    const cell = (this.drawnCell = this.cellPixels());
    const side = g.n * cell;
    const c = this.canvas;
    const ctx = sizeCanvas(c, MARGIN + side + 2, MARGIN + side + 2);
    Object.assign(c.dataset, {
      n: String(g.n),
      cell: String(cell),
      margin: String(MARGIN),
      kind,
      width: String(MARGIN + side + 2),
    });
    ctx.fillStyle = THEME.panel;
    ctx.fillRect(0, 0, MARGIN + side + 2, MARGIN + side + 2);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(this.image!.canvas, MARGIN, MARGIN, side, side);
    const block = g.nHead * cell;
    ctx.strokeStyle = THEME.text;
    ctx.globalAlpha = cell > 1 ? 0.35 : 0.18; // one pixel per head: a lighter line covers less of the scores
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let l = 0; l <= g.nLayer; l++) {
      const at = MARGIN + l * block + 0.5;
      ctx.moveTo(at, MARGIN);
      ctx.lineTo(at, MARGIN + side);
      ctx.moveTo(MARGIN, at);
      ctx.lineTo(MARGIN + side, at);
    }
    ctx.stroke();
    ctx.globalAlpha = 1;
    ctx.fillStyle = THEME.text;
    ctx.font = '10px system-ui, sans-serif';
    ctx.textAlign = 'center';
    const every = Math.max(1, Math.ceil(22 / block));
    for (let l = 0; l < g.nLayer; l += every) {
      const mid = MARGIN + (l + 0.5) * block;
      ctx.fillText(`L${l + 1}`, mid, MARGIN - 6);
      ctx.fillText(`L${l + 1}`, MARGIN / 2, mid + 3);
    }
    if (this.selected) {
      const s = this.selected;
      ctx.strokeStyle = THEME.focus;
      ctx.lineWidth = 2;
      const x = MARGIN + (s.receiver.layer * g.nHead + s.receiver.head) * cell,
        y = MARGIN + (s.sender.layer * g.nHead + s.sender.head) * cell;
      ctx.strokeRect(x - 2, y - 2, cell + 4, cell + 4);
    }
  }

  private drawLegend(kind: CompositionKind): void {
    const r = this.result!,
      g = this.grid!;
    const base = r.baseline[kind],
      max = g.max[kind];
    const bar = h('div', {
      class: 'legend-bar',
      style: `background: linear-gradient(to right, ${SEQUENTIAL.join(', ')})`,
    });
    const times = againstBaseline(max, base).times;
    const ticks = h(
      'div',
      { class: 'legend-ticks' },
      h('span', { style: 'left: 0%', id: 'composition-baseline-tick' }, `${base.mean.toFixed(3)} = random`),
      h('span', { style: 'left: 100%' }, `${score3(max)} (×${times.toFixed(1)})`),
    );
    this.legend.replaceChildren(
      h(
        'figure',
        { class: 'legend', 'aria-label': `colour legend: ${kind}-composition` },
        h('figcaption', {}, `${kind}-composition, from the random mean to the highest score`),
        bar,
        ticks,
      ),
      h(
        'div',
        { class: 'composition-baseline muted small', id: 'composition-baseline' },
        `Random heads of these shapes (${r.baseline.draws} draws): ${base.mean.toFixed(4)} ± ${base.std.toFixed(4)}. A score at or below that mean is white.`,
        h(
          'div',
          { class: 'legend-masked' },
          h('span', { class: 'masked-swatch', style: `background: ${NO_PATH_COLOUR}` }),
          'no path: the receiver is not in a later layer',
        ),
      ),
    );
  }

  private drawTop(pairs: CompositionPair[], kind: CompositionKind): void {
    const base = this.result!.baseline[kind];
    this.top.replaceChildren(
      ...pairs.map((p) =>
        h(
          'li',
          {},
          h(
            'button',
            {
              type: 'button',
              class: 'composition-pair',
              'data-sender': `${p.sender.layer}.${p.sender.head}`,
              'data-receiver': `${p.receiver.layer}.${p.receiver.head}`,
              'data-score': p.score,
              title: `index ${pairIndex(p.sender, p.receiver)}`,
              onclick: () => this.select(p),
            },
            h('span', { class: 'pair' }, pairName(p.sender, p.receiver)),
            h('span', { class: 'score' }, score3(p.score)),
            h('span', { class: 'times' }, `×${againstBaseline(p.score, base).times.toFixed(1)}`),
          ),
        ),
      ),
    );
  }

  private select(p: Pair): void {
    this.selected = { sender: { ...p.sender }, receiver: { ...p.receiver } };
    this.drawCanvas(this.kindShown());
    this.drawSelected();
  }

  /** The selected pair's three scores, and where to look at it next. */
  private drawSelected(): void {
    const s = this.selected,
      g = this.grid,
      r = this.result;
    this.selectedBox.hidden = !s;
    if (!s || !g || !r) return;
    const kind = this.kindShown();
    const at = (s.sender.layer * g.nHead + s.sender.head) * g.n + s.receiver.layer * g.nHead + s.receiver.head;
    const input = KIND_INPUT[kind];
    const inputName = { q: 'queries', k: 'keys', v: 'values' }[input];
    this.selectedBox.replaceChildren(
      h('strong', {}, `${pairName(s.sender, s.receiver)} (index ${pairIndex(s.sender, s.receiver)})`),
      h(
        'p',
        { class: 'small' },
        KINDS.map(
          (k) =>
            `${k} ${score3(g.values[k][at])} (×${againstBaseline(g.values[k][at], r.baseline[k]).times.toFixed(1)})`,
        ).join(' · '),
      ),
      h(
        'p',
        { class: 'muted small' },
        `A high score says the weights let this path exist; whether the model uses it on a given text is measured by path patching.`,
      ),
      h(
        'button',
        {
          type: 'button',
          class: 'ghost',
          id: 'composition-trace',
          onclick: () => this.callbacks.change({ view: 'patching', path: { ...s, input } }),
        },
        `Trace it: path patching into the ${inputName}`,
      ),
      h(
        'button',
        {
          type: 'button',
          class: 'ghost',
          id: 'composition-compare',
          onclick: () => this.callbacks.change({ view: 'compare', compareA: s.sender, compareB: s.receiver }),
        },
        'Compare their attention',
      ),
    );
  }

  private download(format: 'json' | 'csv'): void {
    const r = this.result,
      g = this.grid;
    if (!r || !g || !this.ctx) return;
    const name = exportName([this.ctx.model.name, 'composition', this.gains.checked ? 'gains' : 'stored'], format);
    if (format === 'json') download(JSON.stringify(r), name, 'application/json');
    else download(compositionCsv(g, this.ctx.model.name), name, 'text/csv');
  }

  exportParts(): (string | number)[] {
    return ['composition', this.kindShown()];
  }

  scene(): Scene | null {
    const g = this.grid,
      r = this.result;
    if (!g || !r || !this.image) return null;
    const kind = this.kindShown();
    const side = Math.min(810, Math.max(360, g.n * 3));
    const x = 48,
      y = 48;
    const block = side / g.nLayer;
    const items: SceneItem[] = [
      {
        kind: 'text',
        x: 12,
        y: 18,
        text: `${kind}-composition of ${this.ctx?.model.name ?? ''}: senders (rows) → receivers (columns); random mean ${r.baseline[kind].mean.toFixed(4)}, highest ${score3(g.max[kind])}`,
        size: 12,
        fill: THEME.text,
        weight: 'bold',
      },
      { kind: 'image', x, y, w: side, h: side, pixels: this.image.pixels },
    ];
    for (let l = 0; l <= g.nLayer; l++) {
      const at = l * block;
      items.push({
        kind: 'line',
        x1: x + at,
        y1: y,
        x2: x + at,
        y2: y + side,
        stroke: THEME.text,
        width: 0.5,
        opacity: 0.35,
      });
      items.push({
        kind: 'line',
        x1: x,
        y1: y + at,
        x2: x + side,
        y2: y + at,
        stroke: THEME.text,
        width: 0.5,
        opacity: 0.35,
      });
    }
    const every = Math.max(1, Math.ceil(22 / block));
    for (let l = 0; l < g.nLayer; l += every) {
      const mid = (l + 0.5) * block;
      const label = layerName(l).replace('Layer ', 'L');
      items.push({ kind: 'text', x: x + mid, y: y - 6, text: label, size: 9, fill: THEME.text, anchor: 'middle' });
      items.push({ kind: 'text', x: x - 6, y: y + mid + 3, text: label, size: 9, fill: THEME.text, anchor: 'end' });
    }
    return { width: x + side + 24, height: y + side + 24, background: THEME.panel, items };
  }
}
