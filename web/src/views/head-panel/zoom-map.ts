// One head of a long (streamed) text, zoomable: the whole T × T map drawn from the pooled overview
// (the largest weight of each block of tokens), and, once the shown region holds at most
// max_tile_cells weights, the exact weights of that region from /api/tile. Wheel or the + / −
// buttons zoom, dragging a rectangle zooms into it, Shift+drag or the arrow buttons pan; hover
// gives the exact weight when the tile is in, the block's largest weight before. The token strip
// under the map lists the tokens of the rows and keys on screen.

import { h, hideTooltip, showTooltip, sizeCanvas } from '../../lib/dom';
import { tokenLabel } from '../../lib/format';
import { pixelsCanvas, rectPixels, unitMask } from '../../lib/heatmap';
import {
  cellRange,
  clampRegion,
  fullRegion,
  isFull,
  maxPoolRect,
  panRegion,
  poolBounds,
  regionBetween,
  regionCells,
  zoomRegion,
  type OverviewInfo,
  type Region,
} from '../../lib/long';
import type { ScaleName } from '../../lib/colour';
import type { Pixels } from '../../lib/scene';
import { THEME } from '../../lib/theme';
import type { Tensor } from '../../lib/wire';

/** What an exact tile holds: the attention weights, or the norm-weighted shares (α · ‖v W_O‖,
 *  each query's whole row rescaled to sum 1; /api/tile "view": "norm"). */
export type TileView = 'weights' | 'norm';

export interface ZoomMapData {
  /** Identifies the head (and text): a new key drops the exact tile. */
  key: string;
  info: OverviewInfo;
  /** [cells, cells] the largest weight of each block. */
  overviewMax: Float32Array;
  tokens: string[];
  causal: boolean;
  /** The layer's sliding window in tokens (0: none). */
  window: number;
  scale: ScaleName;
  /** Exact weights of a region, or its norm-weighted shares: [q1 − q0, k1 − k0]. */
  fetchTile(r: Region, view: TileView): Promise<Tensor>;
}

/** Tokens listed in the strip for each axis before it says "…". */
const STRIP_TOKENS = 80;
/** Milliseconds the view waits after a wheel step for the next one before asking for a tile. */
const TILE_DELAY = 40;

export class ZoomMap {
  readonly el: HTMLElement;
  private canvas: HTMLCanvasElement;
  private status: HTMLElement;
  private rowsStrip: HTMLElement;
  private keysStrip: HTMLElement;
  private data: ZoomMapData | null = null;
  private region: Region = fullRegion(1);
  private overviewCanvas: HTMLCanvasElement | null = null;
  /** The exact values on screen: for `region` of head `key`, weights or norm-weighted shares. */
  private tile: {
    key: string;
    region: Region;
    view: TileView;
    values: Float32Array;
    pixels: HTMLCanvasElement;
  } | null = null;
  /** What the exact tiles show (the Norm-weighted button). The pooled overview is always weights. */
  private view: TileView = 'weights';
  private viewButton: HTMLButtonElement;
  private pending = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private drag: { x: number; y: number; pan: boolean; region: Region; at: [number, number] } | null = null;
  private rubber: { a: [number, number]; b: [number, number] } | null = null;
  /** The region last told to onRegion. */
  private reported = '';

  /** onRegion: the map moved to another region (a zoom, a pan, another text). */
  constructor(
    private readonly size: number,
    private readonly onRegion?: (r: Region) => void,
  ) {
    this.canvas = h('canvas', {
      class: 'zoom-map',
      id: 'zoom-map',
      tabindex: 0,
      'aria-label': 'attention of the selected head, zoomable',
    }) as HTMLCanvasElement;
    this.status = h('span', { class: 'muted small', id: 'zoom-status' });
    const button = (label: string, title: string, act: () => void, id: string) =>
      h('button', { type: 'button', class: 'ghost', title, 'aria-label': title, id, onclick: act }, label);
    const pan = (dq: number, dk: number) => () =>
      this.setRegion(
        panRegion(
          this.region,
          Math.round(dq * (this.region.q1 - this.region.q0)),
          Math.round(dk * (this.region.k1 - this.region.k0)),
          this.T,
        ),
      );
    // The norm-weighted view of a long text, tile by tile: the whole maps are not kept, but each
    // exact tile can be computed as norm-weighted shares from the run's value norms.
    this.viewButton = h(
      'button',
      {
        type: 'button',
        class: 'ghost',
        id: 'zoom-norm',
        'aria-pressed': 'false',
        title:
          'exact tiles as norm-weighted shares: α · ‖v W_O‖ per key, each query’s whole row rescaled to sum 1 (the pooled overview stays weights)',
        onclick: () => this.setView(this.view === 'norm' ? 'weights' : 'norm'),
      },
      'Norm-weighted',
    ) as HTMLButtonElement;
    this.rowsStrip = h('p', { class: 'token-strip small', id: 'strip-rows' });
    this.keysStrip = h('p', { class: 'token-strip small', id: 'strip-keys' });
    this.el = h(
      'div',
      { class: 'zoom-wrap' },
      h(
        'div',
        { class: 'zoom-controls' },
        button('+', 'zoom in', () => this.setRegion(zoomRegion(this.region, 2, this.T)), 'zoom-in'),
        button('−', 'zoom out', () => this.setRegion(zoomRegion(this.region, 0.5, this.T)), 'zoom-out'),
        button('⟲', 'whole text', () => this.setRegion(fullRegion(this.T)), 'zoom-reset'),
        button('◀', 'pan to earlier keys', pan(0, -0.5), 'pan-left'),
        button('▶', 'pan to later keys', pan(0, 0.5), 'pan-right'),
        button('▲', 'pan to earlier queries', pan(-0.5, 0), 'pan-up'),
        button('▼', 'pan to later queries', pan(0.5, 0), 'pan-down'),
        this.viewButton,
        this.status,
      ),
      this.canvas,
      this.rowsStrip,
      this.keysStrip,
    );
    this.canvas.addEventListener('wheel', (e) => this.onWheel(e), { passive: false });
    this.canvas.addEventListener('mousedown', (e) => this.onDown(e));
    window.addEventListener('mousemove', (e) => this.onDragMove(e));
    window.addEventListener('mouseup', (e) => this.onUp(e));
    this.canvas.addEventListener('mousemove', (e) => this.onHover(e));
    this.canvas.addEventListener('mouseleave', () => hideTooltip());
  }

  private get T(): number {
    return this.data?.info.T ?? 1;
  }

  /** The region shown (for tests and the export). */
  get shown(): Region {
    return this.region;
  }

  update(data: ZoomMapData): void {
    const textChanged = !this.data || this.data.info !== data.info;
    const keyChanged = !this.data || this.data.key !== data.key || this.data.scale !== data.scale;
    this.data = data;
    const C = data.info.cells;
    const starts = data.info.starts;
    const cells = unitMask(data.causal, data.window, (c) => [starts[c], starts[c + 1] - 1]);
    this.overviewCanvas = pixelsCanvas(
      rectPixels(data.overviewMax, C, C, data.scale, cells ? (i, j) => cells.cell(i, j) : undefined),
    );
    if (textChanged) this.region = fullRegion(data.info.T);
    if (keyChanged) this.tile = null;
    this.region = clampRegion(this.region, data.info.T);
    this.changed();
  }

  /** What the exact tiles show; the tile on screen is asked for again in the other view. */
  setView(view: TileView): void {
    this.view = view;
    this.viewButton.setAttribute('aria-pressed', String(view === 'norm'));
    this.canvas.dataset.view = view;
    this.changed();
  }

  /** delay: milliseconds to wait for a further change before asking for the tile (wheel steps). */
  setRegion(r: Region, delay = 0): void {
    this.region = clampRegion(r, this.T);
    this.changed(delay);
  }

  /** Redraws at once (overview, or the last tile if it is still the region) and asks for the tile. */
  private changed(delay = 0): void {
    this.draw();
    this.strips();
    this.report();
    if (this.timer) clearTimeout(this.timer);
    const ticket = ++this.pending; // a tile still on its way for an earlier region is dropped
    // The user's last input that changed what is shown (a click, the end of a drag, the last wheel
    // step): the latency the user feels runs from it to the frame that shows the exact tile.
    const inputAt = performance.now();
    const d = this.data;
    if (!d) return;
    const r = this.region;
    if (this.hasTile()) return;
    if (regionCells(r) > d.info.max_tile_cells) {
      this.setStatus(
        'overview',
        `${this.describeRegion()} · pooled overview (largest weight of each block); zoom in to ${Math.floor(Math.sqrt(d.info.max_tile_cells))} × ${Math.floor(Math.sqrt(d.info.max_tile_cells))} tokens or less for exact ${this.exactWhat()}`,
      );
      return;
    }
    const view = this.view;
    this.setStatus('loading', `${this.describeRegion()} · loading exact ${this.exactWhat()}…`);
    this.timer = setTimeout(() => {
      const t0 = performance.now();
      d.fetchTile(r, view).then(
        (t) => {
          if (ticket !== this.pending || this.data !== d) return;
          const rows = r.q1 - r.q0,
            cols = r.k1 - r.k0;
          const screen = this.screenPixels();
          const pooled = maxPoolRect(t.data, rows, cols, screen, screen);
          const tokens = unitMask(d.causal, d.window);
          const masked = tokens
            ? (i: number, j: number) => {
                const [r0, r1] = poolBounds(i, rows, pooled.rows),
                  [c0, c1] = poolBounds(j, cols, pooled.cols);
                return tokens.block(r.q0 + r0, r.q0 + r1, r.k0 + c0, r.k0 + c1);
              }
            : undefined;
          this.tile = {
            key: d.key,
            region: r,
            view,
            values: t.data,
            pixels: pixelsCanvas(rectPixels(pooled.data, pooled.rows, pooled.cols, d.scale, masked)),
          };
          this.draw();
          const ms = performance.now() - t0;
          this.canvas.dataset.tileMs = ms.toFixed(1);
          // The tile is on screen from the next frame on: the status says so once that frame is painted.
          requestAnimationFrame(() => {
            if (ticket !== this.pending || this.data !== d) return;
            this.canvas.dataset.inputToTileMs = (performance.now() - inputAt).toFixed(1);
            this.setStatus('tile', `${this.describeRegion()} · exact ${this.exactWhat()} (${rows} × ${cols})`);
          });
        },
        (e: Error) => {
          if (ticket === this.pending) this.setStatus('error', `${this.describeRegion()} · ${e.message}`);
        },
      );
    }, delay);
  }

  /** Tells onRegion about a region it has not been told yet. */
  private report(): void {
    const r = this.region;
    const key = `${r.q0},${r.q1},${r.k0},${r.k1}`;
    if (key === this.reported) return;
    this.reported = key;
    this.onRegion?.(r);
  }

  private hasTile(): boolean {
    const t = this.tile,
      r = this.region;
    return (
      !!t &&
      !!this.data &&
      t.key === this.data.key &&
      t.view === this.view &&
      t.region.q0 === r.q0 &&
      t.region.q1 === r.q1 &&
      t.region.k0 === r.k0 &&
      t.region.k1 === r.k1
    );
  }

  /** What an exact tile holds, in words. */
  private exactWhat(): string {
    return this.view === 'norm' ? 'norm-weighted shares' : 'weights';
  }

  private setStatus(state: string, text: string): void {
    const r = this.region;
    this.canvas.dataset.state = state;
    this.canvas.dataset.region = `${r.q0},${r.q1},${r.k0},${r.k1}`;
    this.status.textContent = text;
  }

  private describeRegion(): string {
    const r = this.region;
    return isFull(r, this.T) ? `all ${this.T} tokens` : `rows ${r.q0}–${r.q1 - 1} × keys ${r.k0}–${r.k1 - 1}`;
  }

  private screenPixels(): number {
    return Math.ceil(this.size * Math.min(3, window.devicePixelRatio || 1));
  }

  private draw(): void {
    const d = this.data;
    if (!d) return;
    const ctx = sizeCanvas(this.canvas, this.size, this.size);
    ctx.fillStyle = THEME.panel;
    ctx.fillRect(0, 0, this.size, this.size);
    ctx.imageSmoothingEnabled = false;
    const r = this.region;
    if (this.hasTile()) {
      ctx.drawImage(this.tile!.pixels, 0, 0, this.size, this.size);
    } else if (this.overviewCanvas) {
      // The cells that cover the region, stretched: block edges may sit a fraction of a cell off.
      const [cq0, cq1] = cellRange(d.info, r.q0, r.q1);
      const [ck0, ck1] = cellRange(d.info, r.k0, r.k1);
      ctx.drawImage(this.overviewCanvas, ck0, cq0, ck1 - ck0, cq1 - cq0, 0, 0, this.size, this.size);
    }
    ctx.strokeStyle = THEME.border;
    ctx.lineWidth = 1;
    ctx.strokeRect(0.5, 0.5, this.size - 1, this.size - 1);
    if (this.rubber) {
      const [a, b] = [this.rubber.a, this.rubber.b];
      ctx.strokeStyle = THEME.focus;
      ctx.lineWidth = 2;
      ctx.strokeRect(
        Math.min(a[1], b[1]) * this.size,
        Math.min(a[0], b[0]) * this.size,
        Math.abs(b[1] - a[1]) * this.size,
        Math.abs(b[0] - a[0]) * this.size,
      );
    }
  }

  private strips(): void {
    const d = this.data;
    if (!d) return;
    const r = this.region;
    const list = (lo: number, hi: number) => {
      const shown = d.tokens.slice(lo, Math.min(hi, lo + STRIP_TOKENS)).map((t) => tokenLabel(t, 16));
      return shown.join(' ') + (hi - lo > STRIP_TOKENS ? ` … (${hi - lo - STRIP_TOKENS} more)` : '');
    };
    this.rowsStrip.replaceChildren(h('strong', {}, `Queries ${r.q0}–${r.q1 - 1}: `), list(r.q0, r.q1));
    this.keysStrip.replaceChildren(h('strong', {}, `Keys ${r.k0}–${r.k1 - 1}: `), list(r.k0, r.k1));
    this.rowsStrip.dataset.first = String(r.q0);
    this.keysStrip.dataset.first = String(r.k0);
  }

  /** Pointer position as fractions of the map: [row, column], each in [0, 1]. */
  private fraction(e: MouseEvent): [number, number] {
    const box = this.canvas.getBoundingClientRect();
    const clamp = (v: number) => Math.max(0, Math.min(1, v));
    return [clamp((e.clientY - box.top) / box.height), clamp((e.clientX - box.left) / box.width)];
  }

  /** The token cell under the pointer. */
  cellAt(e: MouseEvent): { q: number; k: number } {
    const [fq, fk] = this.fraction(e);
    const r = this.region;
    return {
      q: Math.min(r.q1 - 1, r.q0 + Math.floor(fq * (r.q1 - r.q0))),
      k: Math.min(r.k1 - 1, r.k0 + Math.floor(fk * (r.k1 - r.k0))),
    };
  }

  private onWheel(e: WheelEvent): void {
    if (!this.data) return;
    e.preventDefault();
    const [fq, fk] = this.fraction(e);
    this.setRegion(zoomRegion(this.region, e.deltaY < 0 ? 1.5 : 1 / 1.5, this.T, fq, fk), TILE_DELAY);
  }

  private onDown(e: MouseEvent): void {
    if (!this.data || e.button !== 0) return;
    e.preventDefault();
    this.drag = { x: e.clientX, y: e.clientY, pan: e.shiftKey, region: this.region, at: this.fraction(e) };
  }

  private onDragMove(e: MouseEvent): void {
    const g = this.drag;
    if (!g) return;
    if (g.pan) {
      const box = this.canvas.getBoundingClientRect();
      const dq = -((e.clientY - g.y) / box.height) * (g.region.q1 - g.region.q0);
      const dk = -((e.clientX - g.x) / box.width) * (g.region.k1 - g.region.k0);
      this.region = panRegion(g.region, Math.round(dq), Math.round(dk), this.T);
      this.draw();
    } else {
      this.rubber = { a: g.at, b: this.fraction(e) };
      this.draw();
    }
  }

  private onUp(e: MouseEvent): void {
    const g = this.drag;
    if (!g) return;
    this.drag = null;
    const rubber = this.rubber;
    this.rubber = null;
    const moved = Math.abs(e.clientX - g.x) + Math.abs(e.clientY - g.y) > 4;
    if (g.pan) this.setRegion(this.region);
    else if (rubber && moved) this.setRegion(regionBetween(g.region, rubber.a, rubber.b, this.T));
    else this.draw();
  }

  private onHover(e: MouseEvent): void {
    const d = this.data;
    if (!d || this.drag) return;
    const { q, k } = this.cellAt(e);
    const label = `${tokenLabel(d.tokens[q], 24)} → ${tokenLabel(d.tokens[k], 24)}`;
    let line: string;
    const mask = unitMask(d.causal, d.window);
    if (mask?.cell(q, k)) line = mask.reason(q, k);
    else if (this.hasTile()) {
      const r = this.region;
      const quantity = this.tile!.view === 'norm' ? 'norm-weighted share' : 'weight';
      line = `${quantity} ${this.tile!.values[(q - r.q0) * (r.k1 - r.k0) + (k - r.k0)].toFixed(4)} (exact)`;
    } else {
      const C = d.info.cells;
      const ci = Math.floor((q * C) / d.info.T),
        cj = Math.floor((k * C) / d.info.T);
      line = `largest weight in this block ${d.overviewMax[ci * C + cj].toFixed(4)} (tokens ${d.info.starts[ci]}–${d.info.starts[ci + 1] - 1} → ${d.info.starts[cj]}–${d.info.starts[cj + 1] - 1}; zoom in for exact weights)`;
    }
    this.canvas.dataset.hover = `${q},${k}`;
    showTooltip(e.clientX, e.clientY, [label, line, `query ${q}, key ${k} (tokens)`]);
  }

  /** The picture for the export: what is on screen. */
  pixels(): Pixels | null {
    const c = this.canvas;
    if (!c.width) return null;
    const ctx = c.getContext('2d')!;
    const img = ctx.getImageData(0, 0, c.width, c.height);
    return { width: c.width, height: c.height, data: img.data };
  }
}
