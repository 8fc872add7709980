// "Logit lens" (decoders): the residual stream after every layer read through the model's final
// norm and unembedding at one position of the explorer's text (POST /api/logit_lens): a row per
// layer (the embeddings first, the model's own output last) with its most likely next tokens, and
// the rank and probability of one followed token — the answer, or by default the model's own
// prediction — per layer. The row after the toolbar's layer is highlighted. Encoders are told in
// words that they have no next-token logits to read (the server refuses them with 400 not_causal).

import { attentionColour, readableOn } from '../../lib/colour';
import { ApiError, type LensResult } from '../../lib/api';
import { h } from '../../lib/dom';
import { csvField, csvPreamble, download, exportName } from '../../lib/export';
import { tokenLabel, visibleToken } from '../../lib/format';
import { layerName } from '../../lib/numbering';
import type { Scene, SceneItem } from '../../lib/scene';
import { THEME } from '../../lib/theme';
import type { ExportableView, ViewContext } from '../context';

/** Tokens listed per layer. */
export const LENS_TOP_K = 5;

export interface LensCallbacks {
  logitLens(text: string, position: number | null, tokens: string[], topK: number): Promise<LensResult>;
}

/** "Embeddings", "after Layer 3", "after Layer 30 (output)". */
export function lensRowLabel(layer: number, nLayer: number): string {
  if (layer === 0) return 'Embeddings';
  return `after ${layerName(layer - 1)}${layer === nLayer ? ' (output)' : ''}`;
}

/** A token as a reader sees it: a leading space as ␣, line breaks as ↵ (shared with the Patching
 *  view's head lens). */
export const lensToken = visibleToken;

/** The lens as CSV: one row per layer and listed token (kind "top" or "followed"). */
export function lensCsv(r: LensResult, modelName = '', text = ''): string {
  const lines = [
    ...csvPreamble(
      `logit lens at token position ${r.position}`,
      modelName,
      text,
      'layer 0 is the embeddings, layer n the output of Layer n (layers counted from 1 as on the page); token positions and ranks counted from 0',
    ),
    'layer,kind,rank,id,token,probability,logit',
  ];
  for (const l of r.layers)
    for (const [kind, list] of [
      ['top', l.top],
      ['followed', l.followed],
    ] as const)
      for (const t of list)
        lines.push([l.layer, kind, t.rank, t.id, t.text, t.probability, t.logit].map(csvField).join(','));
  return lines.join('\r\n') + '\r\n';
}

export class LensView implements ExportableView {
  readonly el: HTMLElement;
  private position: HTMLSelectElement;
  private follow: HTMLInputElement;
  private status: HTMLElement;
  private table: HTMLTableElement;
  private body: HTMLElement;
  private ctx: ViewContext | null = null;
  private result: LensResult | null = null;
  /** The text the position and followed token belong to; a new text resets them. */
  private text: string | null = null;
  private chosen: number | null = null;
  private generation = 0;

  constructor(private readonly callbacks: LensCallbacks) {
    this.position = h('select', { id: 'lens-position', 'aria-label': 'position read' });
    this.position.addEventListener('change', () => {
      this.chosen = Number(this.position.value);
      void this.refresh();
    });
    this.follow = h('input', {
      id: 'lens-follow',
      type: 'text',
      placeholder: 'the prediction',
      spellcheck: 'false',
      'aria-label': 'token to follow',
      title: 'one token as it would follow the text, usually with its leading space (" Paris")',
    });
    this.follow.addEventListener('change', () => void this.refresh());
    this.status = h('p', { class: 'status', id: 'lens-status', 'aria-live': 'polite' });
    this.body = h('tbody');
    this.table = h('table', { class: 'lens-table', id: 'lens-table', hidden: true }, h('thead'), this.body);
    this.el = h(
      'section',
      { class: 'view lens-view', 'aria-labelledby': 'lens-title' },
      h('div', { class: 'view-head' }, h('h2', { id: 'lens-title' }, 'Logit lens: what each layer would predict')),
      h(
        'p',
        { class: 'muted' },
        'The residual stream after each layer, read as if it were the last one: through the final norm and the unembedding. Early layers often predict a generic word; watch where the answer climbs to the top. Per-head effects on the answer are measured causally in the Patching view.',
      ),
      h(
        'div',
        { class: 'lens-controls' },
        h('label', { class: 'control' }, h('span', {}, 'Position'), this.position),
        h('label', { class: 'control' }, h('span', {}, 'Follow token'), this.follow),
        h(
          'button',
          { type: 'button', class: 'ghost', id: 'lens-json', onclick: () => this.download('json') },
          'Download JSON',
        ),
        h(
          'button',
          { type: 'button', class: 'ghost', id: 'lens-csv', onclick: () => this.download('csv') },
          'Download CSV',
        ),
      ),
      this.status,
      h('div', { class: 'scroll-x' }, this.table),
    );
  }

  async update(ctx: ViewContext): Promise<void> {
    this.ctx = ctx;
    if (ctx.state.text !== this.text) {
      this.text = ctx.state.text;
      this.chosen = null;
      this.result = null;
    }
    await this.refresh();
  }

  private async refresh(): Promise<void> {
    const ctx = this.ctx;
    if (!ctx) return;
    const gen = ++this.generation;
    if (!ctx.model.causal) {
      // The server would refuse (400 not_causal): say so without asking.
      this.result = null;
      this.table.hidden = true;
      this.status.className = 'status error';
      this.status.textContent = `${ctx.model.name} is an encoder (${ctx.model.architecture}): it predicts no next token, so there are no logits to read its layers through; the logit lens needs a decoder (Llama, GPT-2, …).`;
      this.el.setAttribute('data-state', 'error');
      return;
    }
    const follow = this.follow.value;
    this.status.className = 'status';
    this.status.textContent = 'Reading every layer…';
    try {
      const r = await this.callbacks.logitLens(ctx.state.text, this.chosen, follow.trim() ? [follow] : [], LENS_TOP_K);
      if (gen !== this.generation) return;
      this.result = r;
      this.draw(r, ctx);
      this.status.textContent = '';
      this.el.setAttribute('data-state', 'ready');
    } catch (e) {
      if (gen !== this.generation) return;
      this.result = null;
      this.table.hidden = true;
      this.status.className = 'status error';
      this.status.textContent =
        e instanceof ApiError ? e.message : `Cannot reach the headscope server: ${(e as Error).message}`;
      this.el.setAttribute('data-state', 'error');
    }
  }

  private draw(r: LensResult, ctx: ViewContext): void {
    const n = ctx.model.n_layer;
    this.position.replaceChildren(
      ...r.tokens.map((t, i) =>
        h('option', { value: i, selected: i === r.position }, `${i} · ${tokenLabel(t.display ?? t.text, 18)}`),
      ),
    );
    const followed = r.layers[0]?.followed[0];
    const name = followed ? `“${lensToken(followed.text)}”` : '';
    this.table.hidden = false;
    this.table.tHead!.replaceChildren(
      h(
        'tr',
        {},
        h('th', { scope: 'col' }, 'Residual stream'),
        h(
          'th',
          { scope: 'col', id: 'lens-followed-head' },
          `${name}${r.followed_prediction ? ' (the prediction)' : ''}: rank · p`,
        ),
        ...Array.from({ length: LENS_TOP_K }, (_, i) => h('th', { scope: 'col' }, i === 0 ? 'Top token' : `#${i + 1}`)),
      ),
    );
    const highlight = ctx.state.layer + 1;
    this.body.replaceChildren(
      ...r.layers.map((l) =>
        h(
          'tr',
          { 'data-layer': l.layer, class: l.layer === highlight ? 'selected' : null },
          h('th', { scope: 'row' }, lensRowLabel(l.layer, n)),
          h(
            'td',
            { class: 'lens-followed', 'data-rank': l.followed[0]?.rank ?? null },
            l.followed[0] ? `${l.followed[0].rank + 1} · ${pct(l.followed[0].probability)}` : '–',
          ),
          ...l.top.map((t) => {
            const bg = attentionColour(t.probability ?? 0, 'contrast');
            return h(
              'td',
              {
                class: 'lens-cell',
                style: `background: ${bg}; color: ${readableOn(bg)}`,
                title: `id ${t.id} · logit ${t.logit?.toFixed(2)}`,
              },
              h('span', { class: 'lens-token' }, tokenLabel(lensToken(t.text), 14)),
              h('span', { class: 'lens-p' }, pct(t.probability)),
            );
          }),
        ),
      ),
    );
  }

  private download(format: 'json' | 'csv'): void {
    const r = this.result;
    if (!r || !this.ctx) return;
    const name = exportName([this.ctx.model.name, 'lens', `pos${r.position}`], format);
    if (format === 'json') download(JSON.stringify(r, null, 2), name, 'application/json');
    else download(lensCsv(r, this.ctx.model.name, this.ctx.run.text), name, 'text/csv');
  }

  exportParts(): (string | number)[] {
    return ['lens', ...(this.result ? [`pos${this.result.position}`] : [])];
  }

  scene(): Scene | null {
    const r = this.result,
      ctx = this.ctx;
    if (!r || !ctx) return null;
    const rowH = 18,
      labelW = 150,
      colW = 96;
    const items: SceneItem[] = [
      {
        kind: 'text',
        x: 12,
        y: 16,
        text: `logit lens at position ${r.position} (“${r.token.display}”)`,
        size: 12,
        fill: THEME.text,
        weight: 'bold',
      },
    ];
    r.layers.forEach((l, i) => {
      const y = 28 + i * rowH;
      items.push({
        kind: 'text',
        x: 12,
        y: y + 13,
        text: lensRowLabel(l.layer, ctx.model.n_layer),
        size: 10,
        fill: THEME.text,
      });
      l.top.forEach((t, k) => {
        const bg = attentionColour(t.probability ?? 0, 'contrast');
        items.push({ kind: 'rect', x: labelW + k * colW, y, w: colW - 2, h: rowH - 2, fill: bg });
        items.push({
          kind: 'text',
          x: labelW + k * colW + 4,
          y: y + 12,
          text: `${tokenLabel(lensToken(t.text), 10)} ${pct(t.probability)}`,
          size: 10,
          fill: readableOn(bg),
        });
      });
      const f = l.followed[0];
      if (f)
        items.push({
          kind: 'text',
          x: labelW + LENS_TOP_K * colW + 6,
          y: y + 13,
          text: `rank ${f.rank + 1} · ${pct(f.probability)}`,
          size: 10,
          fill: THEME.text,
        });
    });
    return {
      width: labelW + LENS_TOP_K * colW + 110,
      height: 36 + r.layers.length * rowH,
      background: THEME.panel,
      items,
    };
  }
}

function pct(p: number | null): string {
  if (p === null || !Number.isFinite(p)) return '–';
  return p >= 0.1 ? `${(p * 100).toFixed(0)} %` : p >= 0.001 ? `${(p * 100).toFixed(1)} %` : '<0.1 %';
}
