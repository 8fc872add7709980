// All heads of the chosen layer side by side, as heatmaps on one 0–1 colour scale.

import { h, clear, hideTooltip, showTooltip, sizeCanvas } from '../../lib/dom';
import { cellAt, displayPixels, pixelsCanvas, rectPixels, unitMask } from '../../lib/heatmap';
import { maxPoolRect, poolBounds } from '../../lib/long';
import { attentionLegend, attentionLegendItems } from '../../lib/legend';
import { MAP_LABELS, MAP_QUANTITY, type MapView } from '../../lib/maps';
import { headMatrix } from '../../lib/matrix';
import { layerWindow, shownMask, shownMatrix, type ShownMatrix } from '../../lib/display';
import type { Pixels, Scene, SceneItem } from '../../lib/scene';
import { THEME } from '../../lib/theme';
import type { Tensor } from '../../lib/wire';
import { tokenLabel } from '../../lib/format';
import { headReport, roleBadge, roleInfo, roleStyle, type ExportableView, type ViewContext } from '../context';
import { readableOn } from '../../lib/colour';
import { groupColour, kvGroups } from '../../lib/kv-groups';
import { headName, headShort, headWithIndex, layerName, layerWithIndex } from '../../lib/numbering';
import { importanceBadge } from '../ablation/badge';

const TILE = 168;
/** Exported tiles carry token labels when each cell is at least this tall (px): 8 px text. */
const MIN_LABEL_CELL = 7;
/** Room for those labels beside and above a tile (px). */
const TILE_LABEL_GUTTER = 56;

interface Tile {
  shown: ShownMatrix | null; // null: a streamed run's pooled overview
  pixels: Pixels;
}

export interface LayerCallbacks {
  selectHead(head: number): void;
}

export class LayerView implements ExportableView {
  readonly el: HTMLElement;
  private heading: HTMLElement;
  private grid: HTMLElement;
  private legendSlot: HTMLElement;
  private note: HTMLElement;
  private tiles: Tile[] = [];
  private ctx: ViewContext | null = null;
  /** What the tiles were last drawn from. */
  private drawnFrom: {
    attention: Tensor;
    scale: string;
    hideSpecial: boolean;
    run: unknown;
    importance: unknown;
  } | null = null;
  private maps: MapView = 'weights';

  constructor(private readonly callbacks: LayerCallbacks) {
    this.heading = h('h2', { id: 'layer-title' });
    this.grid = h('div', { class: 'head-grid', id: 'head-grid' });
    this.legendSlot = h('div', { class: 'legend-slot' });
    this.note = h('p', { class: 'muted small', id: 'layer-long-note', hidden: true });
    this.el = h(
      'section',
      { class: 'view layer-view', 'aria-labelledby': 'layer-title' },
      h('div', { class: 'view-head' }, this.heading, this.legendSlot),
      h('p', { class: 'muted', id: 'layer-intro' }),
      this.note,
      this.grid,
    );
  }

  /** attention: [1, n_head, U, U], the chosen layer at the chosen level; for a streamed run
   *  (ctx.run.streamed) the layer's overview [n_head, 2, cells, cells]. */
  update(ctx: ViewContext, attention: Tensor): void {
    const { model, state, units } = ctx;
    // Selecting another head changes only the outline: keep the drawn heatmaps.
    const drawn = this.drawnFrom;
    this.ctx = ctx;
    if (
      drawn &&
      drawn.attention === attention &&
      drawn.scale === state.scale &&
      drawn.hideSpecial === state.hideSpecial &&
      drawn.run === ctx.run &&
      drawn.importance === ctx.importance
    ) {
      for (const tile of this.grid.querySelectorAll<HTMLElement>('.head-tile')) {
        const selected = Number(tile.dataset.head) === state.head;
        tile.classList.toggle('selected', selected);
        tile.setAttribute('aria-pressed', String(selected));
      }
      return;
    }
    this.drawnFrom = {
      attention,
      scale: state.scale,
      hideSpecial: state.hideSpecial,
      run: ctx.run,
      importance: ctx.importance,
    };
    const maps = (this.maps = ctx.maps);
    const rollout = maps === 'rollout';
    const quantity = MAP_QUANTITY[maps];
    this.heading.textContent = rollout
      ? `${layerName(state.layer)}: attention rollout up to this layer (one map for all heads)`
      : `${layerName(state.layer)}: all ${model.n_head} heads side by side${maps === 'norm' ? ', norm-weighted' : ''}`;
    this.el.querySelector('#layer-intro')!.textContent = rollout
      ? 'Rollout mixes every head and the residual of this layer and those before it: row = the query, column = the input token its output traces back to. Pick a head below to study it; hover for exact values.'
      : `Each square is one head: row = the token that looks (query), column = the token looked at (key). Click a head to study it below; hover for exact ${maps === 'norm' ? 'norm-weighted shares' : 'weights'}.`;
    this.el.dataset.maps = maps;
    clear(this.legendSlot);
    // Rollout composes every layer: only the causal mask applies to it, not this layer's window.
    const win = rollout ? 0 : layerWindow(model, state.layer, ctx.run.n_tokens);
    this.legendSlot.appendChild(attentionLegend(state.scale, model.causal, maps, win));
    clear(this.grid);
    this.tiles = [];
    // With grouped-query attention, one framed sub-grid per KV head holds the query heads that
    // share its keys and values; otherwise all heads sit in one grid.
    const groups = rollout ? null : kvGroups(model); // rollout mixes every head: no groups to frame
    this.grid.classList.toggle('grouped', groups !== null);
    const slotOf: HTMLElement[] = [];
    if (groups)
      for (const g of groups) {
        const inner = h('div', { class: 'head-grid' });
        this.grid.appendChild(
          h(
            'div',
            {
              class: 'kv-group',
              'data-kv': g.kv,
              style: `--kv-colour: ${groupColour(g.kv)}`,
              role: 'group',
              'aria-label': g.label,
            },
            h(
              'p',
              { class: 'kv-group-label' },
              h('span', { class: 'kv-swatch' }),
              g.label,
              h('span', { class: 'muted' }, ' · these query heads share one key and one value projection'),
            ),
            inner,
          ),
        );
        for (const hd of g.heads) slotOf[hd] = inner;
      }
    const long = ctx.run.streamed && ctx.run.overview ? ctx.run.overview : null;
    this.note.hidden = !long;
    if (long)
      this.note.textContent = `A long text (${ctx.run.n_tokens} tokens, maps streamed): each square shows the largest weight of every block of about ${Math.ceil(long.T / long.cells)} tokens. Pick a head and zoom into its map below for exact weights.`;
    for (let head = 0; head < (rollout && !long ? 1 : model.n_head); head++) {
      const canvas = document.createElement('canvas');
      const c2d = sizeCanvas(canvas, TILE, TILE);
      c2d.imageSmoothingEnabled = false;
      const report = headReport(ctx, state.layer, head);
      const role = roleInfo(model, report.roles.primary.id);
      if (long) {
        const C = long.cells,
          start = (head * 2 + 1) * C * C;
        const max = attention.data.subarray(start, start + C * C);
        const screen = Math.ceil(TILE * Math.min(3, window.devicePixelRatio || 1));
        const pooled = maxPoolRect(max, C, C, screen, screen);
        const cells = unitMask(model.causal, layerWindow(model, state.layer, ctx.run.n_tokens), (c) => [
          long.starts[c],
          long.starts[c + 1] - 1,
        ]);
        const masked = cells
          ? (i: number, j: number) => {
              const [r0, r1] = poolBounds(i, C, pooled.rows),
                [c0, c1] = poolBounds(j, C, pooled.cols);
              return cells.block(r0, r1, c0, c1);
            }
          : undefined;
        const pixels = rectPixels(pooled.data, pooled.rows, pooled.cols, state.scale, masked);
        this.tiles.push({ shown: null, pixels });
        c2d.drawImage(pixelsCanvas(pixels), 0, 0, TILE, TILE);
        canvas.addEventListener('mousemove', (e) => {
          const cell = cellAt(e.offsetX, e.offsetY, TILE, C);
          if (!cell) return hideTooltip();
          const s = long.starts;
          showTooltip(e.clientX, e.clientY, [
            `${layerName(state.layer)} · ${headWithIndex(head)}${groups ? ` · KV head ${model.kv_head_of[head] + 1}` : ''}`,
            `tokens ${s[cell.q]}–${s[cell.q + 1] - 1} → ${s[cell.k]}–${s[cell.k + 1] - 1}`,
            cells?.cell(cell.q, cell.k)
              ? cells.reason(cell.q, cell.k)
              : `largest weight in this block ${max[cell.q * C + cell.k].toFixed(4)}`,
          ]);
        });
      }
      const shown = long ? null : shownMatrix(headMatrix(attention, 0, head), units, state.hideSpecial);
      if (shown) {
        const mask = shownMask(shown, units, model.causal, win);
        const pixels = displayPixels(shown.matrix, state.scale, TILE, mask ?? false);
        this.tiles.push({ shown, pixels });
        c2d.drawImage(pixelsCanvas(pixels), 0, 0, TILE, TILE);
        canvas.addEventListener('mousemove', (e) => {
          const cell = cellAt(e.offsetX, e.offsetY, TILE, shown.matrix.n);
          if (!cell) return hideTooltip();
          const v = shown.matrix.data[cell.q * shown.matrix.n + cell.k];
          showTooltip(e.clientX, e.clientY, [
            `${layerName(state.layer)} · ${rollout ? 'rollout (all heads)' : headWithIndex(head)}${groups && !rollout ? ` · KV head ${model.kv_head_of[head] + 1}` : ''}`,
            `${tokenLabel(shown.labels[cell.q], 24)} → ${tokenLabel(shown.labels[cell.k], 24)}`,
            mask?.cell(cell.q, cell.k) ? mask.reason(cell.q, cell.k) : `${quantity} ${v.toFixed(4)}`,
          ]);
        });
      }
      canvas.addEventListener('mouseleave', hideTooltip);
      if (rollout && !long) {
        canvas.dataset.quantity = quantity;
        this.grid.appendChild(
          h(
            'div',
            {
              class: 'head-tile rollout-tile',
              'data-maps': 'rollout',
              'aria-label': `${layerName(state.layer)}: attention rollout`,
            },
            h('span', { class: 'tile-head' }, h('span', { class: 'tile-name' }, `${MAP_LABELS.rollout} · all heads`)),
            canvas,
          ),
        );
        continue;
      }
      canvas.dataset.quantity = quantity;
      const selected = head === state.head;
      (slotOf[head] ?? this.grid).appendChild(
        h(
          'button',
          {
            type: 'button',
            class: 'head-tile' + (selected ? ' selected' : ''),
            'data-head': head,
            'aria-pressed': String(selected),
            'aria-label': `${headName(head)}: ${report.roles.primary.name}`,
            onclick: () => this.callbacks.selectHead(head),
          },
          h(
            'span',
            { class: 'tile-head' },
            h('span', { class: 'tile-name', title: headWithIndex(head) }, headShort(head)),
            h(
              'span',
              { class: 'badge', style: roleStyle(role.color), title: report.roles.primary.evidence },
              report.roles.primary.name,
            ),
            importanceBadge(ctx, state.layer, head),
          ),
          canvas,
        ),
      );
    }
  }

  exportParts(): (string | number)[] {
    const parts = this.ctx
      ? [`layer${this.ctx.state.layer + 1}`, this.maps === 'rollout' ? 'rollout' : 'heads']
      : ['layer'];
    return this.maps === 'norm' ? [...parts, 'norm'] : parts;
  }

  scene(): Scene | null {
    if (!this.ctx) return null;
    const { model, state } = this.ctx;
    const cols = Math.max(1, Math.min(this.tiles.length, 6));
    const rows = Math.ceil(this.tiles.length / cols);
    const groups = this.maps === 'rollout' ? null : kvGroups(model);
    const gap = 18,
      top = groups ? 68 : 52,
      tileHead = 18;
    // Token labels beside and above every tile when its cells are tall enough to read them.
    const labels = this.tiles[0]?.shown?.labels ?? [];
    const gutter = labels.length > 0 && TILE / labels.length >= MIN_LABEL_CELL ? TILE_LABEL_GUTTER : 0;
    const width = cols * (TILE + gutter) + (cols + 1) * gap;
    const height = top + rows * (TILE + tileHead + gap + gutter) + 60;
    const items: SceneItem[] = [
      {
        kind: 'text',
        x: gap,
        y: 24,
        text: `${model.name} · ${layerWithIndex(state.layer)} · ${this.maps === 'rollout' ? 'attention rollout' : `${model.n_head} heads`} · ${state.level}s · ${MAP_LABELS[this.maps].toLowerCase()}`,
        size: 15,
        fill: THEME.text,
        weight: 'bold',
      },
      { kind: 'text', x: gap, y: 42, text: this.ctx.run.text, size: 11, fill: THEME.muted },
    ];
    if (groups)
      items.push({
        kind: 'text',
        x: gap,
        y: 58,
        text: `${groups.map((g) => g.label).join(' · ')} (head names and frames coloured by KV head)`,
        size: 11,
        fill: THEME.muted,
      });
    this.tiles.forEach((tile, head) => {
      const x = gap + (head % cols) * (TILE + gap + gutter) + gutter;
      const y = top + Math.floor(head / cols) * (TILE + tileHead + gap + gutter);
      const report = headReport(this.ctx!, state.layer, head);
      const role = roleInfo(model, report.roles.primary.id);
      if (this.maps === 'rollout' && this.tiles.length === 1)
        items.push({
          kind: 'text',
          x,
          y: y + 12,
          text: 'rollout · all heads',
          size: 12,
          fill: THEME.text,
          weight: 'bold',
        });
      else {
        items.push({
          kind: 'text',
          x,
          y: y + 12,
          text: headShort(head),
          size: 12,
          fill: groups ? groupColour(model.kv_head_of[head]) : THEME.text,
          weight: 'bold',
        });
        items.push({ kind: 'rect', x: x + 30, y: y + 2, w: 22, h: 13, fill: role.color, rx: 3 });
        items.push({
          kind: 'text',
          x: x + 41,
          y: y + 12,
          text: roleBadge(role.name),
          size: 9,
          fill: readableOn(role.color),
          anchor: 'middle',
          weight: 'bold',
        });
        items.push({
          kind: 'text',
          x: x + 58,
          y: y + 12,
          text: report.roles.primary.name,
          size: 11,
          fill: THEME.muted,
        });
      }
      const ty = y + tileHead + gutter;
      if (gutter > 0) {
        const cell = TILE / labels.length;
        labels.forEach((label, i) => {
          const text = tokenLabel(label, 9);
          items.push({
            kind: 'text',
            x: x - 3,
            y: ty + (i + 0.5) * cell + 3,
            text,
            size: 8,
            fill: THEME.text,
            anchor: 'end',
          });
          items.push({
            kind: 'text',
            x: x + (i + 0.5) * cell + 3,
            y: ty - 3,
            text,
            size: 8,
            fill: THEME.text,
            rotate: -90,
          });
        });
      }
      items.push({ kind: 'image', x, y: ty, w: TILE, h: TILE, pixels: tile.pixels });
      items.push({
        kind: 'rect',
        x,
        y: ty,
        w: TILE,
        h: TILE,
        fill: 'none',
        stroke: head === state.head ? THEME.focus : groups ? groupColour(model.kv_head_of[head]) : THEME.border,
        strokeWidth: head === state.head || groups ? 2 : 1,
      });
    });
    items.push(
      ...attentionLegendItems(
        gap,
        height - 50,
        Math.min(320, width - 2 * gap),
        state.scale,
        THEME.text,
        model.causal,
        this.maps,
        this.maps === 'rollout' ? 0 : layerWindow(model, state.layer, this.ctx.run.n_tokens),
      ),
    );
    return { width, height, background: THEME.panel, items };
  }
}
