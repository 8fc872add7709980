// Two heads side by side and their difference A − B (blue where A attends more, red where B
// does), with the mean total-variation distance between their rows as one number.

import { h, clear } from '../../lib/dom';
import { fixed, tokenLabel } from '../../lib/format';
import { displayPixels, signedPixels, unitMask, type UnitMask } from '../../lib/heatmap';
import { blockMass, overviewPart, type OverviewInfo } from '../../lib/long';
import { LabeledHeatmap } from '../../lib/labeled-heatmap';
import { attentionLegend, attentionLegendItems, signedLegend, signedLegendItems } from '../../lib/legend';
import { difference, headMatrix, maxAbs, type Matrix } from '../../lib/matrix';
import { layerWindow, shownMask, shownMatrix } from '../../lib/display';
import type { Scene, SceneItem } from '../../lib/scene';
import type { HeadRef, ViewState } from '../../lib/state';
import { THEME } from '../../lib/theme';
import type { Tensor } from '../../lib/wire';
import { headReport, type ExportableView, type ViewContext } from '../context';
import { headName, layerName } from '../../lib/numbering';

/** What the three maps are drawn from: heads A and B over one set of rows and columns. */
interface CompareData {
  a: Matrix;
  b: Matrix;
  labels: string[];
  masks: [UnitMask | undefined, UnitMask | undefined];
  /** The sliding window of each head's layer (0: none), for the legends. */
  windows: [number, number];
  /** A long text: the overview's blocks (rows and columns are blocks of tokens); else null. */
  blocks: OverviewInfo | null;
}

/** Largest side of each of the three heatmaps, in CSS pixels. */
const COMPARE_SIZE = 250;

export interface CompareCallbacks {
  change(patch: Partial<ViewState>): void;
}

/** Mean over rows of ½ Σ_k |a_qk − b_qk|: 0 for identical heads, 1 for disjoint ones. */
export function meanRowDistance(a: Matrix, b: Matrix): number {
  if (a.n === 0) return 0;
  let total = 0;
  for (let q = 0; q < a.n; q++) {
    let d = 0;
    for (let k = 0; k < a.n; k++) d += Math.abs(a.data[q * a.n + k] - b.data[q * a.n + k]);
    total += d / 2;
  }
  return total / a.n;
}

export class CompareView implements ExportableView {
  readonly el: HTMLElement;
  private pickers: HTMLElement;
  private maps: LabeledHeatmap[] = [
    new LabeledHeatmap(COMPARE_SIZE),
    new LabeledHeatmap(COMPARE_SIZE),
    new LabeledHeatmap(COMPARE_SIZE),
  ];
  private captions: HTMLElement[] = [h('figcaption'), h('figcaption'), h('figcaption')];
  private legends: HTMLElement[] = [h('div'), h('div'), h('div')];
  private summary: HTMLElement;
  /** A long text: what the block-by-block maps show and what they cannot. */
  private longNote: HTMLElement;
  private ctx: ViewContext | null = null;
  private limit = 1;
  private distance = 0;
  /** A long text: the overview's blocks the maps are drawn at; null for token or word maps. */
  private blocks: OverviewInfo | null = null;

  constructor(private readonly callbacks: CompareCallbacks) {
    this.pickers = h('div', { class: 'pickers' });
    this.summary = h('p', { class: 'compare-summary', id: 'compare-summary' });
    this.longNote = h('p', { class: 'muted small', id: 'compare-long-note', hidden: true });
    this.el = h(
      'section',
      { class: 'view compare-view', 'aria-labelledby': 'compare-title' },
      h('div', { class: 'view-head' }, h('h2', { id: 'compare-title' }, 'Two heads side by side')),
      this.pickers,
      this.summary,
      this.longNote,
      h(
        'div',
        { class: 'compare-row' },
        ...this.maps.map((m, i) =>
          h(
            'figure',
            { class: 'compare-fig', 'data-panel': ['a', 'b', 'diff'][i] },
            this.captions[i],
            m.el,
            this.legends[i],
          ),
        ),
      ),
    );
  }

  private picker(
    name: 'A' | 'B',
    ref: HeadRef,
    nLayer: number,
    nHead: number,
    key: 'compareA' | 'compareB',
  ): HTMLElement {
    const layer = h('select', { 'aria-label': `head ${name}: layer`, id: `compare-${name.toLowerCase()}-layer` });
    for (let l = 0; l < nLayer; l++)
      layer.appendChild(h('option', { value: l, selected: l === ref.layer }, layerName(l)));
    const head = h('select', { 'aria-label': `head ${name}: head`, id: `compare-${name.toLowerCase()}-head` });
    for (let hh = 0; hh < nHead; hh++)
      head.appendChild(h('option', { value: hh, selected: hh === ref.head }, headName(hh)));
    const onChange = () => this.callbacks.change({ [key]: { layer: Number(layer.value), head: Number(head.value) } });
    layer.addEventListener('change', onChange);
    head.addEventListener('change', onChange);
    return h('div', { class: 'picker' }, h('strong', {}, name), layer, head);
  }

  /** layerA, layerB: [1, n_head, U, U] attention of the layers of heads A and B. */
  update(ctx: ViewContext, layerA: Tensor, layerB: Tensor): void {
    const { model, state, units } = ctx;
    const { compareA: a, compareB: b } = state;
    const sa = shownMatrix(headMatrix(layerA, 0, a.head), units, state.hideSpecial);
    const sb = shownMatrix(headMatrix(layerB, 0, b.head), units, state.hideSpecial);
    const wa = layerWindow(model, a.layer, ctx.run.n_tokens),
      wb = layerWindow(model, b.layer, ctx.run.n_tokens);
    this.draw(ctx, {
      a: sa.matrix,
      b: sb.matrix,
      labels: sa.labels,
      masks: [shownMask(sa, units, model.causal, wa), shownMask(sb, units, model.causal, wb)],
      windows: [wa, wb],
      blocks: null,
    });
  }

  /** A long text (maps streamed): overviewA, overviewB are the pooled overviews [n_head, 2,
   *  cells, cells] of the layers of heads A and B; the heads are compared block by block. */
  updateStreamed(ctx: ViewContext, overviewA: Tensor, overviewB: Tensor): void {
    const { model, state, run } = ctx;
    const info = run.overview!;
    const C = info.cells;
    const { compareA: a, compareB: b } = state;
    const block = (t: Tensor, head: number): Matrix => ({ n: C, data: blockMass(overviewPart(t, head, 0, C), info) });
    const span = (c: number): [number, number] => [info.starts[c], info.starts[c + 1] - 1];
    const wa = layerWindow(model, a.layer, run.n_tokens),
      wb = layerWindow(model, b.layer, run.n_tokens);
    this.draw(ctx, {
      a: block(overviewA, a.head),
      b: block(overviewB, b.head),
      labels: Array.from({ length: C }, (_, c) => `tokens ${span(c)[0]}–${span(c)[1]}`),
      masks: [unitMask(model.causal, wa, span), unitMask(model.causal, wb, span)],
      windows: [wa, wb],
      blocks: info,
    });
  }

  private drawPickers(ctx: ViewContext): void {
    const { model, state } = ctx;
    const { compareA: a, compareB: b } = state;
    clear(this.pickers);
    this.pickers.append(
      this.picker('A', a, model.n_layer, model.n_head, 'compareA'),
      this.picker('B', b, model.n_layer, model.n_head, 'compareB'),
      h(
        'button',
        {
          type: 'button',
          class: 'ghost',
          id: 'compare-swap',
          onclick: () => this.callbacks.change({ compareA: b, compareB: a }),
        },
        'Swap',
      ),
      h(
        'button',
        {
          type: 'button',
          class: 'ghost',
          id: 'compare-use-selected',
          onclick: () => this.callbacks.change({ compareA: { layer: state.layer, head: state.head } }),
        },
        'A = selected head',
      ),
    );
  }

  private draw(ctx: ViewContext, d: CompareData): void {
    this.ctx = ctx;
    this.blocks = d.blocks;
    this.el.dataset.streamed = String(!!d.blocks);
    const { model, state } = ctx;
    const { compareA: a, compareB: b } = state;
    this.drawPickers(ctx);
    const diff = difference(d.a, d.b);
    this.limit = Math.max(0.05, maxAbs(diff.data));
    this.distance = meanRowDistance(d.a, d.b);
    const what = d.blocks ? 'mean weight of a query in the block' : '';
    const describe = (m: Matrix, name: string) => (q: number, k: number, v: number) =>
      [
        d.blocks
          ? `${d.labels[q]} → ${d.labels[k]}`
          : `${tokenLabel(d.labels[q], 24)} → ${tokenLabel(d.labels[k], 24)}`,
        `${name}: ${v >= 0 && name.includes('−') ? '+' : ''}${v.toFixed(4)}${what && !name.includes('−') ? ` (${what})` : ''}`,
        name.includes('−') ? `A ${d.a.data[q * m.n + k].toFixed(4)}, B ${d.b.data[q * m.n + k].toFixed(4)}` : '',
      ].filter(Boolean);
    [d.a, d.b].forEach((m, i) =>
      this.maps[i].update({
        matrix: m,
        pixels: displayPixels(m, state.scale, COMPARE_SIZE, d.masks[i] ?? false),
        labels: d.labels,
        describe: describe(m, i === 0 ? 'A' : 'B'),
      }),
    );
    this.maps[2].update({
      matrix: diff,
      pixels: signedPixels(diff.data, diff.n, diff.n, this.limit),
      labels: d.labels,
      describe: describe(diff, 'A − B'),
    });
    const ra = headReport(ctx, a.layer, a.head).roles.primary,
      rb = headReport(ctx, b.layer, b.head).roles.primary;
    this.captions[0].textContent = `A: ${layerName(a.layer)}, ${headName(a.head)} – ${ra.name}`;
    this.captions[1].textContent = `B: ${layerName(b.layer)}, ${headName(b.head)} – ${rb.name}`;
    this.captions[2].textContent = 'A − B';
    d.windows.forEach((w, i) => {
      clear(this.legends[i]);
      this.legends[i].appendChild(attentionLegend(state.scale, model.causal, 'weights', w));
    });
    clear(this.legends[2]);
    this.legends[2].appendChild(signedLegend(this.limit, 'difference (blue: A more, red: B more)'));
    this.showSummary(ctx, d.blocks);
  }

  private showSummary(ctx: ViewContext, blocks: OverviewInfo | null): void {
    const distance = fixed(this.distance, 3);
    this.longNote.hidden = !blocks;
    if (!blocks) {
      this.summary.textContent = `Mean distance between their rows: ${distance} (0 = the two heads attend identically, 1 = never to the same ${ctx.units.level}s).`;
      return;
    }
    const size = Math.ceil(blocks.T / blocks.cells);
    this.summary.textContent = `Mean distance between their rows, block by block: ${distance} (0 = the two heads share their weight out alike, 1 = never to the same blocks).`;
    this.longNote.textContent = `A long text (${ctx.run.n_tokens} tokens) keeps no full maps, so each cell here is a block of about ${size} × ${size} tokens: the weight a query of the row block gives the column block, on average (each row still sums to 1). Differences inside a block do not show, so the two heads may differ more token by token; the head panel below zooms into the exact weights of one head.`;
  }

  exportParts(): (string | number)[] {
    if (!this.ctx) return ['compare'];
    const { compareA: a, compareB: b } = this.ctx.state;
    const parts = ['compare', `layer${a.layer + 1}-head${a.head + 1}`, 'vs', `layer${b.layer + 1}-head${b.head + 1}`];
    // A long text's heads are compared block by block: the file name says so.
    return this.blocks ? [...parts, 'blocks'] : parts;
  }

  scene(): Scene | null {
    if (!this.ctx) return null;
    const pad = 16,
      gap = 24,
      top = 54;
    const sizes = this.maps.map((m) => m.size);
    const items: SceneItem[] = [
      {
        kind: 'text',
        x: pad,
        y: 24,
        text: `${this.ctx.model.name}: two heads and their difference${this.blocks ? `, block by block (a long text: blocks of about ${Math.ceil(this.blocks.T / this.blocks.cells)} tokens)` : ''}`,
        size: 15,
        fill: THEME.text,
        weight: 'bold',
      },
      { kind: 'text', x: pad, y: 42, text: this.summary.textContent ?? '', size: 11, fill: THEME.muted },
    ];
    let x = pad;
    const maxH = Math.max(...sizes.map((s) => s.height));
    this.maps.forEach((m, i) => {
      items.push({
        kind: 'text',
        x,
        y: top + 12,
        text: this.captions[i].textContent ?? '',
        size: 12,
        fill: THEME.text,
        weight: 'bold',
      });
      items.push(...m.sceneItems(x, top + 18));
      const ly = top + 24 + maxH;
      const lw = Math.min(220, sizes[i].width);
      items.push(
        ...(i < 2
          ? attentionLegendItems(x, ly, lw, this.ctx!.state.scale, THEME.text, this.ctx!.model.causal)
          : signedLegendItems(x, ly, lw, this.limit, 'A − B', THEME.text)),
      );
      x += sizes[i].width + gap;
    });
    return { width: x, height: top + maxH + 80, background: THEME.panel, items };
  }
}
