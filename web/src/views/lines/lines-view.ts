// One head as lines from each token (left, the query) to the tokens it attends to (right, the
// keys); line strength follows the weight on the chosen colour scale. Hover a token to see only
// its lines and their exact weights; click it to keep that view (click again or Esc to release).
// On a long text (maps streamed) it draws one window of tokens at a time from the exact weights
// of a tile (/api/tile): the region of the head panel's zoomable map when that is small enough.

import { scaleValue } from '../../lib/colour';
import { canvasPoint, h, hideTooltip, pointerKind, showTooltip, sizeCanvas } from '../../lib/dom';
import { tokenLabel } from '../../lib/format';
import { LINES_MAX, panRegion, type Region } from '../../lib/long';
import { headMatrix } from '../../lib/matrix';
import { shownMatrix } from '../../lib/display';
import { drawScene, type Scene, type SceneItem } from '../../lib/scene';
import { THEME } from '../../lib/theme';
import type { Tensor } from '../../lib/wire';
import { pixelsCanvas } from '../../lib/heatmap';
import { tokenShown } from '../../lib/units';
import { headReport, type ExportableView, type ViewContext } from '../context';
import { headName, layerName } from '../../lib/numbering';

const ROW = 20;
const TOP = 28;
const COL_W = 130;
const GAP_W = 260;
const VALUE_W = 48;
/** Right edge of the query labels and left edge of the key labels. */
const QX = VALUE_W + COL_W;
const KX = QX + GAP_W;
/** Lines fainter than this (after the colour scale) are not drawn when no token is in focus. */
const MIN_VISIBLE = 0.05;

export interface LinesCallbacks {
  lock(unit: number): void;
  /** A long text: show region `r` in the head panel's zoomable map (the lines follow it). */
  showRegion?(r: Region): void;
}

type Focus = { side: 'query' | 'key'; index: number } | null;

/** What the lines are drawn from: rows (queries) × cols (keys) weights and their labels. */
interface LinesData {
  rows: number;
  cols: number;
  /** rows × cols, row-major. */
  values: Float32Array;
  rowLabels: string[];
  colLabels: string[];
  /** Token positions of each row and each column (for the ✦ of generated tokens). */
  rowTokens: number[][];
  colTokens: number[][];
  /** Unit index of each row for the page's lock; null: a tile, whose rows lock here. */
  rowUnits: number[] | null;
  /** A tile of a long text: its region (token positions). */
  tile: Region | null;
}

/** The window of a long text that the view shows, and whether it is the head panel's region. */
export type LinesWindow = Region & { follows: boolean };

export class LinesView implements ExportableView {
  readonly el: HTMLElement;
  private canvas: HTMLCanvasElement;
  private heading: HTMLElement;
  private note: HTMLElement;
  /** A long text: where the window stands and the buttons that move it. */
  private windowBar: HTMLElement;
  private windowText: HTMLElement;
  private ctx: ViewContext | null = null;
  private data: LinesData | null = null;
  private hover: Focus = null;
  /** A tile's locked query, as a token position (-1: none). */
  private tileLock = -1;
  /** A long text: the first token of the view's own window (used while the head panel's map
   *  shows more than LINES_MAX tokens a side). */
  start = 0;

  constructor(private readonly callbacks: LinesCallbacks) {
    this.heading = h('h2', { id: 'lines-title' });
    this.note = h('p', { class: 'muted', id: 'lines-note', 'aria-live': 'polite' });
    this.canvas = h('canvas', {
      class: 'lines-canvas',
      id: 'lines-canvas',
      tabindex: 0,
      'aria-label': 'attention lines of the selected head',
    });
    this.windowText = h('span', { class: 'muted small', id: 'lines-window-text' });
    this.windowBar = this.windowControls();
    const pointer = pointerKind(this.canvas);
    this.canvas.addEventListener('mousemove', (e) => {
      if (pointer() !== 'touch') this.onMove(e);
    });
    this.canvas.addEventListener('mouseleave', () => {
      if (pointer() === 'touch') return; // a tapped value stays until the next tap
      this.hover = null;
      hideTooltip();
      this.draw();
    });
    this.canvas.addEventListener('click', (e) => {
      const p = canvasPoint(this.canvas, e);
      const f = this.focusAt(p.x, p.y);
      // Touch: a first tap shows a token's lines and weights (as hovering does); a second tap on
      // the same query token locks it.
      if (pointer() === 'touch' && JSON.stringify(f) !== JSON.stringify(this.hover)) return this.onMove(e);
      if (!f || f.side !== 'query' || !this.data || !this.ctx) return;
      this.toggleLock(f.index);
    });
    this.el = h(
      'section',
      { class: 'view lines-view', 'aria-labelledby': 'lines-title' },
      h('div', { class: 'view-head' }, this.heading),
      this.windowBar,
      this.note,
      h('div', { class: 'scroll-y' }, this.canvas),
    );
  }

  /** A long text: "Earlier" and "Later" move the window by half its size (and the head panel's
   *  map with it). */
  private windowControls(): HTMLElement {
    const move = (direction: -1 | 1) => () => {
      const d = this.data?.tile;
      const T = this.ctx?.run.n_tokens;
      if (!d || !T) return;
      const step = direction * Math.max(1, Math.floor((d.q1 - d.q0) / 2));
      const next = panRegion(d, step, step, T);
      this.start = next.q0;
      this.callbacks.showRegion?.(next);
    };
    return h(
      'div',
      { class: 'lines-window', id: 'lines-window', hidden: true },
      h('button', { type: 'button', class: 'ghost', id: 'lines-earlier', onclick: move(-1) }, '◀ Earlier tokens'),
      h('button', { type: 'button', class: 'ghost', id: 'lines-later', onclick: move(1) }, 'Later tokens ▶'),
      this.windowText,
    );
  }

  /** attention: [1, n_head, U, U] of the selected layer. */
  update(ctx: ViewContext, attention: Tensor): void {
    this.ctx = ctx;
    const { state, units } = ctx;
    const shown = shownMatrix(headMatrix(attention, 0, state.head), units, state.hideSpecial);
    const n = shown.matrix.n;
    this.data = {
      rows: n,
      cols: n,
      values: shown.matrix.data,
      rowLabels: shown.labels,
      colLabels: shown.labels,
      rowTokens: shown.index.map((u) => units.tokens[u] ?? []),
      colTokens: shown.index.map((u) => units.tokens[u] ?? []),
      rowUnits: shown.index,
      tile: null,
    };
    this.windowBar.hidden = true;
    this.setHeading(ctx);
    this.draw();
  }

  /** A long text: the exact weights `tile` ([q1 − q0, k1 − k0]) of the selected head over window
   *  `w`, at token level. */
  updateTile(ctx: ViewContext, w: LinesWindow, tile: Tensor): void {
    const sameTile = this.data?.tile && this.ctx?.run === ctx.run;
    this.ctx = ctx;
    if (!sameTile) this.tileLock = -1;
    const labels = ctx.run.tokens.map(tokenShown);
    const range = (a: number, b: number) => Array.from({ length: b - a }, (_, i) => a + i);
    this.data = {
      rows: w.q1 - w.q0,
      cols: w.k1 - w.k0,
      values: tile.data,
      rowLabels: labels.slice(w.q0, w.q1),
      colLabels: labels.slice(w.k0, w.k1),
      rowTokens: range(w.q0, w.q1).map((t) => [t]),
      colTokens: range(w.k0, w.k1).map((t) => [t]),
      rowUnits: null,
      tile: { q0: w.q0, q1: w.q1, k0: w.k0, k1: w.k1 },
    };
    const T = ctx.run.n_tokens;
    this.windowBar.hidden = false;
    this.windowBar.dataset.region = `${w.q0},${w.q1},${w.k0},${w.k1}`;
    this.windowBar.dataset.follows = String(w.follows);
    this.windowText.textContent = w.follows
      ? `queries ${w.q0}–${w.q1 - 1} → keys ${w.k0}–${w.k1 - 1}: the region of the map in the head panel below`
      : `tokens ${w.q0}–${w.q1 - 1} of ${T}; zoom the map in the head panel below to ${LINES_MAX} × ${LINES_MAX} tokens or less and these lines follow it`;
    this.setHeading(ctx);
    this.draw();
  }

  /** A long text whose window could not be drawn: says why, draws nothing. */
  showProblem(ctx: ViewContext, message: string): void {
    this.ctx = ctx;
    this.data = null;
    this.setHeading(ctx);
    sizeCanvas(this.canvas, 1, 1);
    this.note.textContent = message;
  }

  private setHeading(ctx: ViewContext): void {
    const { state } = ctx;
    const role = headReport(ctx, state.layer, state.head).roles.primary;
    this.heading.textContent = `${layerName(state.layer)} · ${headName(state.head)} – ${role.name}: who looks at whom`;
  }

  private toggleLock(index: number): void {
    const d = this.data!;
    if (d.rowUnits) {
      const unit = d.rowUnits[index];
      this.callbacks.lock(this.ctx!.state.lock === unit ? -1 : unit);
      return;
    }
    const token = d.tile!.q0 + index;
    this.tileLock = this.tileLock === token ? -1 : token;
    this.draw();
  }

  private lockedIndex(): number {
    const d = this.data;
    if (!this.ctx || !d) return -1;
    if (!d.rowUnits) return this.tileLock >= d.tile!.q0 && this.tileLock < d.tile!.q1 ? this.tileLock - d.tile!.q0 : -1;
    return this.ctx.state.lock < 0 ? -1 : d.rowUnits.indexOf(this.ctx.state.lock);
  }

  /** The shown rows (or columns) that hold a generated token (Generate), marked ✦. */
  private generatedRows(side: 'query' | 'key' = 'query'): Set<number> {
    const out = new Set<number>();
    const ctx = this.ctx;
    if (!ctx?.generated?.length || !this.data) return out;
    const positions = new Set(ctx.generated);
    (side === 'query' ? this.data.rowTokens : this.data.colTokens).forEach((tokens, i) => {
      if (tokens.some((t) => positions.has(t))) out.add(i);
    });
    return out;
  }

  private focus(): Focus {
    const locked = this.lockedIndex();
    return locked >= 0 ? { side: 'query', index: locked } : this.hover;
  }

  private focusAt(x: number, y: number): Focus {
    if (!this.data) return null;
    const i = Math.floor((y - TOP) / ROW);
    if (i < 0) return null;
    if (x <= QX + 8 && i < this.data.rows) return { side: 'query', index: i };
    if (x >= KX - 8 && i < this.data.cols) return { side: 'key', index: i };
    return null;
  }

  /** The weight between row `q` and column `k`. */
  private value(q: number, k: number): number {
    return this.data!.values[q * this.data!.cols + k];
  }

  private onMove(e: MouseEvent): void {
    const p = canvasPoint(this.canvas, e);
    const f = this.focusAt(p.x, p.y);
    const changed = JSON.stringify(f) !== JSON.stringify(this.hover);
    this.hover = f;
    if (f && this.data) showTooltip(e.clientX, e.clientY, this.tooltip(f));
    else hideTooltip();
    if (changed) this.draw();
  }

  /** A token's four strongest lines; on a tile, also how much of a query's weight is in it. */
  private tooltip(f: NonNullable<Focus>): string[] {
    const d = this.data!;
    const query = f.side === 'query';
    const others = query ? d.cols : d.rows;
    const labels = query ? d.colLabels : d.rowLabels;
    const weights = Array.from({ length: others }, (_, j) => (query ? this.value(f.index, j) : this.value(j, f.index)));
    const order = weights
      .map((w, j) => [w, j] as const)
      .sort((a, b) => b[0] - a[0])
      .slice(0, 4);
    const own = (query ? d.rowLabels : d.colLabels)[f.index];
    const inside = weights.reduce((a, b) => a + b, 0);
    return [
      query ? `“${tokenLabel(own, 20)}” attends to` : `attending to “${tokenLabel(own, 20)}”`,
      ...order.map(([w, j]) => `${tokenLabel(labels[j], 20)}: ${w.toFixed(4)}`),
      ...(d.tile && query
        ? [`${inside.toFixed(3)} of its weight goes to the keys shown; ${(1 - inside).toFixed(3)} to other tokens`]
        : []),
      ...(d.tile ? [`token ${(query ? d.tile.q0 : d.tile.k0) + f.index}`] : []),
    ];
  }

  private draw(): void {
    if (!this.data) return;
    const scene = this.scene();
    if (!scene) return;
    drawScene(sizeCanvas(this.canvas, scene.width, scene.height), scene, pixelsCanvas);
    const locked = this.lockedIndex();
    const generated = this.generatedRows().size;
    this.canvas.dataset.generated = String(generated);
    const release = this.data.tile ? 'click it again to release' : 'click it again or press Esc to release';
    this.note.textContent =
      (locked >= 0
        ? `Locked on “${this.data.rowLabels[locked]}”: ${release}.`
        : 'Hover (or tap) a token on the left to see where it looks, on the right to see who looks at it; click a left token (or tap it again) to lock it.') +
      (this.data.tile
        ? ' A long text keeps no full maps: these are the exact weights of this window, read from the model for it; weight that goes to tokens outside the window is not drawn.'
        : '') +
      (generated > 0 ? ` ✦ marks the ${generated} generated ${generated === 1 ? 'token' : 'tokens'}.` : '');
  }

  exportParts(): (string | number)[] {
    if (!this.ctx) return ['lines'];
    const t = this.data?.tile;
    const parts = [`layer${this.ctx.state.layer + 1}`, `head${this.ctx.state.head + 1}`, 'lines'];
    return t ? [...parts, `tokens${t.q0}-${t.q1 - 1}`] : parts;
  }

  scene(): Scene | null {
    if (!this.ctx || !this.data) return null;
    const d = this.data;
    const focus = this.focus();
    // A long text's window says which tokens it holds (positions counted from 0).
    const t = d.tile;
    const items: SceneItem[] = [
      {
        kind: 'text',
        x: QX,
        y: 16,
        text: t ? `queries ${t.q0}–${t.q1 - 1} of ${this.ctx.run.n_tokens}` : 'query (looks)',
        size: 11,
        fill: THEME.muted,
        anchor: 'end',
      },
      {
        kind: 'text',
        x: KX,
        y: 16,
        text: t ? `keys ${t.k0}–${t.k1 - 1} (looked at)` : 'key (looked at)',
        size: 11,
        fill: THEME.muted,
      },
      ...this.lineItems(focus),
      ...this.labelItems(focus),
    ];
    const n = Math.max(d.rows, d.cols);
    return { width: KX + COL_W + VALUE_W, height: TOP + n * ROW + 8, background: THEME.panel, items };
  }

  /** A line from each query to each key it gives weight to (only the focused token's, if any). */
  private lineItems(focus: Focus): SceneItem[] {
    const d = this.data!;
    const scale = this.ctx!.state.scale;
    const items: SceneItem[] = [];
    const y = (i: number) => TOP + i * ROW + ROW / 2;
    for (let q = 0; q < d.rows; q++)
      for (let k = 0; k < d.cols; k++) {
        const inFocus = !focus || (focus.side === 'query' ? focus.index === q : focus.index === k);
        if (!inFocus) continue;
        const strength = scaleValue(this.value(q, k), scale);
        if (strength < (focus ? 0.01 : MIN_VISIBLE)) continue;
        items.push({
          kind: 'line',
          x1: QX + 6,
          y1: y(q),
          x2: KX - 6,
          y2: y(k),
          stroke: THEME.accent,
          width: focus ? 3 : 2,
          opacity: Math.min(1, strength),
        });
      }
    return items;
  }

  /** The query labels (left), the key labels (right) and, for a focused token, its weights. */
  private labelItems(focus: Focus): SceneItem[] {
    const d = this.data!;
    const items: SceneItem[] = [];
    const y = (i: number) => TOP + i * ROW + ROW / 2;
    const generated = this.generatedRows(),
      generatedKeys = this.generatedRows('key');
    const label = (side: 'query' | 'key', i: number, text: string, mark: string): SceneItem => {
      const active = focus?.side === side && focus.index === i;
      const plain = mark ? THEME.accent : THEME.text;
      return {
        kind: 'text',
        x: side === 'query' ? QX : KX,
        y: y(i) + 4,
        text: mark + tokenLabel(text, 18),
        size: 12,
        fill: active ? THEME.focus : plain,
        weight: active ? 'bold' : 'normal',
        ...(side === 'query' ? { anchor: 'end' as const } : {}),
      };
    };
    for (let i = 0; i < d.rows; i++) items.push(label('query', i, d.rowLabels[i], generated.has(i) ? '✦ ' : ''));
    for (let i = 0; i < d.cols; i++) items.push(label('key', i, d.colLabels[i], generatedKeys.has(i) ? '✦ ' : ''));
    if (!focus) return items;
    const others = focus.side === 'query' ? d.cols : d.rows;
    for (let i = 0; i < others; i++) {
      const w = focus.side === 'query' ? this.value(focus.index, i) : this.value(i, focus.index);
      items.push({
        kind: 'text',
        x: focus.side === 'query' ? KX + COL_W + VALUE_W - 4 : 4,
        y: y(i) + 4,
        text: w.toFixed(3),
        size: 11,
        fill: THEME.muted,
        mono: true,
        anchor: focus.side === 'query' ? 'end' : 'start',
      });
    }
    return items;
  }
}
