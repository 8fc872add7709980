// The selected head: "Head k – <role>", a description built from what was measured, the four
// statistics of the lesson (entropy, sparsity, max and average attention), the role's typical
// function, and the head's attention drawn large with labels.

import type { AblateResult, AblationMode, HeadStats, LinkResult, ModelInfo } from '../../lib/api';
import { evidenceNote } from '../../lib/evidence';
import { showStat, statConstant, statInfo } from '../../lib/statistics';
import { tokenShown } from '../../lib/units';
import { linksText, recognisedText } from '../../lib/tokens';
import { h, clear } from '../../lib/dom';
import { fixed, percent, tokenLabel } from '../../lib/format';
import { displayPixels } from '../../lib/heatmap';
import { kvGroups } from '../../lib/kv-groups';
import { LabeledHeatmap } from '../../lib/labeled-heatmap';
import { headMatrix } from '../../lib/matrix';
import { layerWindow, shownMask, shownMatrix } from '../../lib/display';
import type { Scene, SceneItem } from '../../lib/scene';
import { THEME } from '../../lib/theme';
import type { Tensor } from '../../lib/wire';
import { attentionLegend, attentionLegendItems } from '../../lib/legend';
import { MAP_QUANTITY, mapHead } from '../../lib/maps';
import { headReport, roleInfo, roleStyle, type ExportableView, type ViewContext } from '../context';
import type { Region } from '../../lib/long';
import { ZoomMap, type TileView } from './zoom-map';
import { headName, headTag, headWithIndex, layerName, layerWithIndex } from '../../lib/numbering';
import { AblateBox } from '../ablation/ablate-box';
import '../ablation/ablation.css';
import { importanceBadge } from '../ablation/badge';
import { importanceTooLong, rankOf, rankText } from '../ablation/importance';

/** Exact weights of one head of a streamed run over a region, or its norm-weighted shares (POST /api/tile). */
export type TileFetcher = (layer: number, head: number, r: Region, view?: TileView) => Promise<Tensor>;

/** The lesson's four statistics: which field, how its value and note are shown; the label and
 *  help text are the catalogue's (lib/statistics.ts). */
export const LESSON_STATS: readonly {
  key: keyof HeadStats;
  show: (v: number | null) => string;
  note: (s: HeadStats, model: ModelInfo) => string;
}[] = [
  {
    key: 'entropy_bits',
    show: (v) => fixed(v, 2),
    note: (s) => `bits per row · ${fixed(s.entropy_norm, 2)} of the maximum`,
  },
  {
    key: 'sparsity',
    show: (v) => percent(v),
    note: (s, model) =>
      `of weights are negligible · ${percent(statConstant(model, 'cover_mass'))} of the mass on ${fixed(s.keys_90, 1)} keys`,
  },
  { key: 'max_attention', show: (v) => fixed(v, 2), note: () => 'largest weight of a row, averaged over rows' },
  {
    key: 'avg_attention',
    show: (v) => fixed(v, 2),
    note: () => 'weight where the attention lands (Σ a², 1/n if uniform)',
  },
];

/** The further measurements, shown in a table under the lesson's four (labels and values as the
 *  catalogue words and measures them). */
const MORE_STATS: readonly (keyof HeadStats)[] = [
  'prev_mass',
  'self_mass',
  'next_mass',
  'local_mass',
  'first_mass',
  'end_special_mass',
  'sink_mass',
  'sink_mass_norm',
  'punct_mass',
  'content_mass',
  'duplicate_mass',
  'mean_distance',
  'mean_offset',
  'uniform_overlap',
];

/** Largest side of the selected head's heatmap, in CSS pixels. */
const HEATMAP_SIZE = 440;

/** A clause as a sentence: capital first letter, full stop at the end. */
function sentence(s: string): string {
  const t = s.trim();
  if (t === '') return t;
  const c = t[0].toUpperCase() + t.slice(1);
  return /[.!?]$/.test(c) ? c : c + '.';
}

/** Role id given when no pattern is strong enough (analysis/roles.h, kMixed); its evidence
 *  already names the strongest pattern, which is then also the secondary role. */
const MIXED_ROLE = 'mixed';

export class HeadPanel implements ExportableView {
  readonly el: HTMLElement;
  private title: HTMLElement;
  private kicker: HTMLElement;
  private heatmap: LabeledHeatmap;
  private zoom: ZoomMap;
  private figureNote: HTMLElement;
  private legendSlot: HTMLElement;
  private info: HTMLElement;
  private importanceLine: HTMLElement;
  private ablateBox = new AblateBox();
  private ctx: ViewContext | null = null;
  /** Unit index of every shown row (special tokens may be hidden). */
  private shownIndex: number[] = [];

  /** onQuery: a cell was clicked; receives the unit index of its row (the query).
   *  onExport: the panel's own PNG / SVG buttons.
   *  onAblate: removes head (layer, head) from the current text's forward pass (POST /api/ablate).
   *  onMeasure: "Measure importance": every head's ablation effect on the text (POST /api/importance).
   *  onRegion: a long text's zoomable map moved to another region. */
  constructor(
    onQuery: (unit: number) => void,
    onExport: (format: 'png' | 'svg') => void,
    private readonly onAblate: (layer: number, head: number, mode: AblationMode) => Promise<AblateResult>,
    private readonly onMeasure: () => void,
    onRegion?: (r: Region) => void,
  ) {
    this.kicker = h('p', { class: 'kicker' });
    this.importanceLine = h('p', { class: 'muted small', id: 'head-importance' });
    this.title = h('h2', { id: 'head-title' });
    this.heatmap = new LabeledHeatmap(HEATMAP_SIZE, (q) => onQuery(this.shownIndex[q]));
    this.zoom = new ZoomMap(HEATMAP_SIZE, onRegion);
    this.figureNote = h('p', { class: 'muted small', id: 'head-figure-note' });
    this.legendSlot = h('div', { class: 'legend-slot' });
    this.info = h('div', { class: 'head-info' });
    this.el = h(
      'section',
      { class: 'panel head-panel', id: 'head-panel', 'aria-labelledby': 'head-title' },
      h(
        'div',
        { class: 'view-head' },
        h('div', {}, this.kicker, this.title, this.importanceLine),
        h(
          'div',
          { class: 'exports', role: 'group', 'aria-label': 'export the selected head' },
          h('span', { class: 'muted small' }, 'Export head '),
          h(
            'button',
            {
              type: 'button',
              class: 'ghost',
              id: 'head-export-png',
              title: 'this head (map, statistics, role, text) as a PNG image',
              onclick: () => onExport('png'),
            },
            'PNG',
          ),
          h(
            'button',
            {
              type: 'button',
              class: 'ghost',
              id: 'head-export-svg',
              title: 'this head (map, statistics, role, text) as an SVG drawing',
              onclick: () => onExport('svg'),
            },
            'SVG',
          ),
        ),
      ),
      h(
        'div',
        { class: 'head-body' },
        h('div', { class: 'head-figure' }, this.heatmap.el, this.zoom.el, this.figureNote, this.legendSlot),
        this.info,
      ),
    );
  }

  /** attention: [1, n_head, U, U] of the selected layer; for a streamed run (ctx.run.streamed)
   *  the layer's overview [n_head, 2, cells, cells] and `tile` to fetch exact weights. */
  update(ctx: ViewContext, attention: Tensor, tile?: TileFetcher): void {
    this.ctx = ctx;
    const { model, state, run } = ctx;
    const report = headReport(ctx, state.layer, state.head);
    const { primary } = report.roles;
    const role = roleInfo(model, primary.id);
    const group = kvGroups(model)?.[model.kv_head_of[state.head]];
    this.kicker.textContent = `${layerName(state.layer)} of ${model.n_layer} · ${headName(state.head).toLowerCase()} of ${model.n_head}${group ? ` · ${group.label} (shared K and V)` : ''} · ${model.name}`;
    clear(this.title);
    this.title.append(
      `${headWithIndex(state.head)} – `,
      h('span', { class: 'role-name', style: `--role: ${role.color}` }, primary.label),
    );
    this.title.setAttribute('data-role', primary.id);
    this.drawImportanceLine(ctx);
    this.ablateBox.update(`${run.text}\u0000${state.layer}.${state.head}`, headTag(state.layer, state.head), (mode) =>
      this.onAblate(state.layer, state.head, mode),
    );

    const long = !!run.streamed && !!run.overview && !!tile;
    this.heatmap.el.hidden = long;
    this.zoom.el.hidden = !long;
    this.figureNote.hidden = !long;
    if (long) this.updateLong(ctx, attention, tile!);
    else this.updateHeatmap(ctx, attention);
    clear(this.legendSlot);
    this.legendSlot.appendChild(
      attentionLegend(
        state.scale,
        model.causal,
        long ? 'weights' : ctx.maps,
        long || ctx.maps !== 'rollout' ? layerWindow(model, state.layer, ctx.run.n_tokens) : 0,
      ),
    );
    this.updateInfo(ctx);
  }

  /** The region a long text's zoomable map shows; undefined while it shows no long text. */
  get region(): Region | undefined {
    return this.zoom.el.hidden ? undefined : this.zoom.shown;
  }

  /** Moves a long text's zoomable map to region `r` (as a zoom or pan would). */
  showRegion(r: Region): void {
    if (!this.zoom.el.hidden) this.zoom.setRegion(r);
  }

  /** A long text: the zoomable map (pooled overview, exact tiles once zoomed in), token level. */
  private updateLong(ctx: ViewContext, overview: Tensor, tile: TileFetcher): void {
    const { model, state, run } = ctx;
    const info = run.overview!;
    const C = info.cells;
    const start = (state.head * 2 + 1) * C * C; // [head, 1] is the largest weight of each block
    this.zoom.update({
      key: `${run.text}\u0000${state.layer}.${state.head}`,
      info,
      overviewMax: overview.data.subarray(start, start + C * C),
      tokens: run.tokens.map(tokenShown),
      causal: model.causal,
      window: layerWindow(model, state.layer, ctx.run.n_tokens),
      scale: state.scale,
      fetchTile: (r, view) => tile(state.layer, state.head, r, view),
    });
    this.figureNote.textContent = `A long text (${run.n_tokens} tokens): its maps were streamed through the statistics, not kept. Zoomed out, each pixel shows the largest weight of a block of tokens; zoom in (wheel, + / −, or drag a rectangle; Shift+drag pans) for the exact weights. The map is at token level${state.level === 'word' || state.hideSpecial ? ', with special tokens' : ''}; the statistics and roles are the whole text's.`;
  }

  private updateHeatmap(ctx: ViewContext, attention: Tensor): void {
    const { model, state, units } = ctx;
    const shown = shownMatrix(headMatrix(attention, 0, mapHead(ctx.maps, state.head)), units, state.hideSpecial);
    this.shownIndex = shown.index;
    const quantity = MAP_QUANTITY[ctx.maps];
    this.heatmap.el.dataset.maps = ctx.maps;
    // Rollout has one map per layer: the panel shows the layer's, and says so.
    this.figureNote.hidden = ctx.maps !== 'rollout';
    if (ctx.maps === 'rollout')
      this.figureNote.textContent = `This map is the attention rollout up to ${layerName(state.layer).toLowerCase()}, every head and the residual together (one map per layer, not this head's); the statistics are this head's weights.`;
    // Rollout composes every layer: only the causal mask applies to it, not one layer's window.
    const mask = shownMask(
      shown,
      units,
      model.causal,
      ctx.maps === 'rollout' ? 0 : layerWindow(model, state.layer, ctx.run.n_tokens),
    );
    this.heatmap.update({
      matrix: shown.matrix,
      pixels: displayPixels(shown.matrix, state.scale, HEATMAP_SIZE, mask ?? false),
      labels: shown.labels,
      describe: (q, k, v) => [
        `${tokenLabel(shown.labels[q], 24)} → ${tokenLabel(shown.labels[k], 24)}`,
        mask?.cell(q, k)
          ? mask.reason(q, k)
          : `${quantity} ${v.toFixed(4)}${state.hideSpecial ? ' (renormalised without special tokens)' : ''}`,
        `query ${shown.index[q]}, key ${shown.index[k]} (${units.level}s)`,
      ],
    });
  }

  private updateInfo(ctx: ViewContext): void {
    const { model, state, run } = ctx;
    const report = headReport(ctx, state.layer, state.head);
    const { primary, secondary } = report.roles;
    const role = roleInfo(model, primary.id);

    const s = report.stats;
    const stats = h('div', { class: 'stat-grid', id: 'head-stats' });
    for (const st of LESSON_STATS) {
      const v = s[st.key] as number | null;
      const info = statInfo(model, st.key);
      stats.appendChild(
        h(
          'div',
          // Focusable, so that the explanation opens on keyboard focus as it does on hover.
          {
            class: 'stat',
            'data-stat': st.key,
            'data-value': v === null ? '' : String(v),
            tabindex: 0,
            'aria-describedby': `stat-help-${st.key}`,
          },
          h('span', { class: 'stat-value' }, st.show(v)),
          h('span', { class: 'stat-label' }, info.label),
          h('span', { class: 'stat-note' }, st.note(s, model)),
          h('span', { class: 'stat-help', id: `stat-help-${st.key}`, role: 'tooltip' }, info.help),
        ),
      );
    }
    const more = h('table', { class: 'more-stats' });
    for (const key of MORE_STATS) {
      const v = s[key] as number | null;
      const info = statInfo(model, key);
      more.appendChild(
        h(
          'tr',
          { 'data-stat': key, 'data-value': v === null ? '' : String(v), title: info.help },
          h('th', {}, info.label),
          h('td', {}, showStat(info, v)),
        ),
      );
    }
    const scores = h('ul', { class: 'score-list' });
    for (const sc of report.roles.scores.slice(0, 6)) {
      const r = roleInfo(model, sc.id);
      scores.appendChild(
        h(
          'li',
          { title: sc.evidence },
          h('span', { class: 'score-name' }, sc.label),
          h(
            'span',
            { class: 'score-bar' },
            h('span', { style: `width: ${((sc.score ?? 0) * 100).toFixed(1)}%; background: ${r.color}` }),
          ),
          h('span', { class: 'score-value' }, fixed(sc.score, 2)),
        ),
      );
    }

    const secondaryRole = roleInfo(model, secondary.id);
    const onText = report.on_text;
    const tokenLabels = run.tokens.map(tokenShown);
    const discount = `weights without ${run.sink_columns ?? 'the first token'}, renormalised`;
    const textLine = !onText
      ? ''
      : onText.recognised_text
        ? h(
            'p',
            { id: 'head-on-text', 'data-recognised': onText.recognised ?? '' },
            `${sentence(recognisedText(onText.recognised_text, onText.matching, tokenLabels))} (${discount})`,
          )
        : onText.links_text
          ? h(
              'p',
              { id: 'head-on-text' },
              `Strongest links on this text (${discount}): ${linksText(onText.links, tokenLabels)}.`,
            )
          : '';
    clear(this.info);
    this.info.append(
      h('h3', {}, 'Description'),
      h(
        'p',
        { id: 'head-description' },
        sentence(primary.evidence),
        secondary.evidence && primary.id !== MIXED_ROLE
          ? ` Next strongest pattern, ${secondary.name.toLowerCase()}: ${sentence(secondary.evidence)}`
          : '',
      ),
      textLine,
      h(
        'p',
        { class: 'muted' },
        h('span', { class: 'badge', style: roleStyle(role.color) }, primary.name),
        ' ',
        sentence(role.description),
      ),
      evidenceNote(model, 'head-evidence') ?? '',
      this.ablateBox.el,
      this.linkSearch(ctx),
      h(
        'p',
        { class: 'muted small' },
        `Measured on this text, over all ${s.n_queries} query ${run.level}s (${run.special === 'hide' ? 'special tokens left out, rows renormalised' : 'special tokens included'}). Confidence ${fixed(report.roles.confidence, 2)}, ${fixed(report.roles.margin, 2)} ahead of ${secondaryRole.name.toLowerCase()}.`,
      ),
      h('h3', {}, 'Statistics'),
      stats,
      this.sinkComparison(s),
      h('h3', {}, 'Typical function'),
      h('p', { id: 'head-function' }, sentence(role.typical_function)),
      role.literature ? h('p', { class: 'muted small' }, 'See: ', role.literature) : '',
      h('details', { class: 'more' }, h('summary', {}, 'Role scores and more measurements'), scores, more),
    );
  }

  /** The head's special-token share by weight and by what is moved (sink_mass vs sink_mass_norm). */
  private sinkComparison(s: HeadStats): HTMLElement {
    const cell = (key: 'sink_mass' | 'sink_mass_norm', label: string) =>
      h(
        'div',
        { class: 'stat', 'data-stat': key, 'data-value': s[key] === null ? '' : String(s[key]) },
        h('span', { class: 'stat-value' }, percent(s[key] as number | null, 1)),
        h('span', { class: 'stat-label' }, label),
      );
    return h(
      'div',
      { class: 'sink-compare', id: 'sink-compare' },
      h(
        'div',
        { class: 'stat-grid' },
        cell('sink_mass', 'on first or special tokens, by weight'),
        cell('sink_mass_norm', 'the same, by norm (‖α·vW_O‖)'),
      ),
      h(
        'p',
        { class: 'muted small' },
        'Weight on [CLS]/[SEP] or the first token often moves small vectors (Kobayashi et al. 2020): when the share by norm is much lower, that attention is mostly a place to park, not information moved.',
      ),
    );
  }

  /** The head's importance on this text; before it is measured, the button (where the server can
   *  measure it) or why it cannot be measured, in words. */
  private drawImportanceLine(ctx: ViewContext): void {
    const { model, state, run } = ctx;
    clear(this.importanceLine);
    const imp = ctx.importance;
    if (imp) {
      const i = state.layer * model.n_head + state.head;
      this.importanceLine.append(
        importanceBadge(ctx, state.layer, state.head),
        ` ${rankText(imp, i)} on this text, zero ablation`,
      );
      this.importanceLine.dataset.rank = String(rankOf(imp, i));
    } else {
      delete this.importanceLine.dataset.rank;
      const measuring = ctx.importanceStatus === 'measuring';
      const n = model.n_layer * model.n_head;
      const tooLong = importanceTooLong(run.n_tokens, n);
      if (tooLong && !measuring) {
        this.importanceLine.append(h('span', { class: 'muted', id: 'importance-unavailable' }, tooLong));
      } else
        this.importanceLine.append(
          h(
            'button',
            {
              type: 'button',
              class: 'ghost',
              id: 'measure-importance',
              disabled: measuring,
              onclick: () => this.onMeasure(),
              title: `Removes each of the ${n} heads in turn from this text's forward pass and measures the change of the output`,
            },
            measuring ? 'Measuring importance…' : 'Measure importance',
          ),
          measuring
            ? h('progress', { id: 'importance-progress', 'aria-label': `measuring the importance of ${n} heads` })
            : '',
          measuring
            ? ` ${n} heads, one rerun each`
            : ctx.importanceStatus
              ? h('span', { class: 'error', id: 'importance-error' }, ` ${ctx.importanceStatus}`)
              : ` of all ${n} heads on this text: how much the output changes when each is removed`,
        );
    }
  }

  /** "Which heads link A → B?": two token pickers and the heads ranked by that weight. The pickers
   *  hold one option per token, so they are built when the section is first opened: a head switch on
   *  an 8,192-token text must not build 16,384 options. */
  private linkSearch(ctx: ViewContext): HTMLElement {
    const details = h(
      'details',
      { class: 'more', id: 'link-search' },
      h('summary', {}, 'Which heads link A → B?'),
    ) as HTMLDetailsElement;
    details.addEventListener('toggle', () => {
      if (!details.open || details.querySelector('#link-go')) return;
      const labels = ctx.run.tokens.map((t) => tokenLabel(tokenShown(t)));
      const pick = (id: string, initial: number) => {
        const sel = h('select', { id }) as HTMLSelectElement;
        labels.forEach((l, i) => sel.appendChild(h('option', { value: String(i) }, `${i}: ${l}`)));
        sel.value = String(Math.max(0, Math.min(initial, labels.length - 1)));
        return sel;
      };
      const q = pick('link-query', labels.length - 2),
        k = pick('link-key', 1);
      const out = h('ol', { id: 'link-results', class: 'small' });
      const go = async () => {
        clear(out);
        try {
          const res = await fetch('/api/link', {
            method: 'POST',
            headers: { 'Content-Type': 'application/json' },
            body: JSON.stringify({
              text: ctx.run.text,
              truncate: true,
              q: Number(q.value),
              k: Number(k.value),
              limit: 8,
            }),
          });
          const r = (await res.json()) as LinkResult;
          for (const x of r.heads)
            out.appendChild(
              h(
                'li',
                { 'data-layer': String(x.layer), 'data-head': String(x.head) },
                `${layerName(x.layer)} ${headName(x.head).toLowerCase()}: ${fixed(x.weight, 2)} (${fixed(x.weight_no_sink, 2)} without ${r.sink_columns}) – ${x.roles.primary.name}`,
              ),
            );
        } catch (e) {
          out.appendChild(h('li', {}, String(e)));
        }
      };
      details.append(
        h(
          'p',
          { class: 'small' },
          'From ',
          q,
          ' to ',
          k,
          ' ',
          h('button', { type: 'button', id: 'link-go', onclick: () => void go() }, 'Rank heads'),
        ),
        out,
      );
    });
    return details;
  }

  exportParts(): (string | number)[] {
    if (!this.ctx) return ['head'];
    const parts = [`layer${this.ctx.state.layer + 1}`, `head${this.ctx.state.head + 1}`];
    return this.ctx.maps === 'weights' || this.ctx.run.streamed ? parts : [...parts, this.ctx.maps];
  }

  scene(): Scene | null {
    if (!this.ctx) return null;
    const { model, state } = this.ctx;
    const report = headReport(this.ctx, state.layer, state.head);
    const zoomPixels = this.zoom.el.hidden ? null : this.zoom.pixels();
    const { width: hw, height: hh } = zoomPixels ? { width: HEATMAP_SIZE, height: HEATMAP_SIZE } : this.heatmap.size;
    const pad = 18;
    const infoX = pad + hw + 24;
    const width = Math.max(infoX + 480, 560); // room for the longest statistic note at 11 px
    const height = Math.max(hh + 110, 330);
    const items: SceneItem[] = [
      {
        kind: 'text',
        x: pad,
        y: 26,
        text: `${headWithIndex(state.head)} – ${report.roles.primary.label}`,
        size: 17,
        fill: THEME.text,
        weight: 'bold',
      },
      {
        kind: 'text',
        x: pad,
        y: 44,
        text: `${model.name} · ${layerWithIndex(state.layer)} · ${state.level}s`,
        size: 11,
        fill: THEME.muted,
      },
      ...(zoomPixels
        ? [{ kind: 'image' as const, x: pad, y: 56, w: hw, h: hh, pixels: zoomPixels }]
        : this.heatmap.sceneItems(pad, 56)),
      ...attentionLegendItems(
        pad,
        56 + hh + 6,
        Math.min(300, hw),
        state.scale,
        THEME.text,
        this.ctx.model.causal,
        this.ctx.run.streamed ? 'weights' : this.ctx.maps,
        this.ctx.run.streamed || this.ctx.maps !== 'rollout'
          ? layerWindow(this.ctx.model, state.layer, this.ctx.run.n_tokens)
          : 0,
      ),
    ];
    LESSON_STATS.forEach((st, i) => {
      const y = 80 + i * 56;
      items.push({
        kind: 'text',
        x: infoX,
        y,
        text: st.show(report.stats[st.key] as number | null),
        size: 22,
        fill: THEME.accent,
        weight: 'bold',
      });
      items.push({
        kind: 'text',
        x: infoX,
        y: y + 18,
        text: `${statInfo(model, st.key).label} — ${st.note(report.stats, model)}`,
        size: 11,
        fill: THEME.muted,
      });
    });
    return { width, height, background: THEME.panel, items };
  }
}
