// "Why several heads?": the general argument, then what this model's heads actually do on the
// current text: the roles found in the selected layer, what removing heads does to the output
// (measured by ablation: how concentrated the effect is, the most important head against the ten
// least important together, heads of one layer that differ in role and in importance), which heads
// contribute most to the selected token's output, and how the roles spread over the whole model.

import type { AblateResult, Decomposition, HeadReport, RunResult } from '../../lib/api';
import {
  byImportance,
  effectOf,
  effectText,
  leastImportant,
  rankOf,
  topShare,
  unitLabel,
  importanceTooLong,
} from '../ablation/importance';
import { h, clear } from '../../lib/dom';
import { fixed, tokenLabel } from '../../lib/format';
import { tokenShown } from '../../lib/units';
import { roleInfo, roleStyle, type ViewContext } from '../context';
import { headName, headTag, layerName } from '../../lib/numbering';

/** How many of the least important heads are removed together against the most important one. */
const LEAST_SET = 10;

/** Role id of heads that park their attention on [CLS]/[SEP]/BOS (analysis/roles.h, kSink). */
const SINK_ROLE = 'sink';
/** Role id of decoder heads resting on the first token and writing almost nothing (kDormant). */
const DORMANT_ROLE = 'dormant';

function list(items: number[]): string {
  const s = items.map((i) => String(i + 1)); // head numbers, counted from 1 (lib/numbering.ts)
  return s.length <= 1 ? s.join('') : `${s.slice(0, -1).join(', ')} and ${s[s.length - 1]}`;
}

/** Heads of one layer grouped by primary role, largest group first. */
export function groupByRole(
  reports: HeadReport[],
): { id: string; name: string; heads: number[]; example: HeadReport }[] {
  const groups = new Map<string, { id: string; name: string; heads: number[]; example: HeadReport }>();
  for (const r of reports) {
    const g = groups.get(r.roles.primary.id) ?? {
      id: r.roles.primary.id,
      name: r.roles.primary.name,
      heads: [],
      example: r,
    };
    g.heads.push(r.head);
    if ((r.roles.primary.score ?? 0) > (g.example.roles.primary.score ?? 0)) g.example = r;
    groups.set(g.id, g);
  }
  return [...groups.values()].sort((a, b) => b.heads.length - a.heads.length || a.heads[0] - b.heads[0]);
}

export class WhyHeadsView {
  readonly el: HTMLElement;
  private body: HTMLElement;

  /** ablate: removes heads (0-based [layer, head]) from the text's pass together (zero ablation).
   *  measure: asks for every head's importance on the text. */
  constructor(
    private readonly ablate: (text: string, heads: [number, number][]) => Promise<AblateResult>,
    private readonly measure: () => void,
  ) {
    this.body = h('div', { id: 'why-heads-body' });
    this.el = h(
      'section',
      { class: 'panel why', 'aria-labelledby': 'why-title' },
      h('h2', { id: 'why-title' }, 'Why several heads?'),
      h(
        'p',
        {},
        'Each row of an attention map is a distribution that sums to one, so a lone head faces a trade-off for every token: weight on the previous word is weight taken away from the subject, the sentence boundary or an antecedent. ',
        'Splitting the layer into heads removes that trade-off. Each head has its own small query, key and value projections, forms its own pattern, and returns its own summary; W_O then decides how much of each summary reaches the rest of the network. ',
        'Whether the heads really divide the work is a question about a trained model. Below, this model answers it on your text twice: by what each head looks at, and by what happens to the output when heads are taken out.',
      ),
      this.body,
    );
  }

  /** plain: the same run with special tokens left out (its roles say what sink heads do otherwise). */
  update(ctx: ViewContext, dec: Decomposition | null, plain: RunResult): void {
    const { model, state, run } = ctx;
    clear(this.body);
    const layerReports = run.heads.filter((r) => r.layer === state.layer);
    const groups = groupByRole(layerReports);
    const ul = h('ul', { class: 'role-groups', id: 'why-roles' });
    for (const g of groups) {
      const info = roleInfo(model, g.id);
      ul.appendChild(
        h(
          'li',
          {},
          h('span', { class: 'badge', style: roleStyle(info.color) }, g.name),
          ` ${g.heads.length === 1 ? 'head' : 'heads'} ${list(g.heads)}. ${headName(g.example.head)}: ${g.example.roles.primary.evidence}`,
        ),
      );
    }
    const spread =
      groups.length >= 3
        ? `On this text the ${model.n_head} heads of ${layerName(state.layer).toLowerCase()} fall into ${groups.length} different patterns:`
        : groups.length === 2
          ? `On this text ${layerName(state.layer).toLowerCase()} shows only two patterns, so its heads overlap more than the textbook picture suggests:`
          : `On this text every head of ${layerName(state.layer).toLowerCase()} shows the same dominant pattern; the differences between them are in the details (see the role scores of each head):`;
    this.body.append(h('h3', {}, `What the heads of ${model.name} do`), h('p', {}, spread), ul);
    const dormant = this.dormantNote(ctx, layerReports);
    if (dormant) this.body.append(dormant);
    this.body.append(this.removal(ctx, layerReports));

    // A head that parks most of its weight on special tokens still spends the rest somewhere, and
    // that remainder is where such heads differ: their roles once the special tokens are left out.
    // The special tokens this model put in the text ([CLS] and [SEP], <s>, ...); none, as with
    // SmolLM2 on plain text, leaves nothing to take out and the section away.
    const specials = [...new Set(run.tokens.filter((t) => t.special).map(tokenShown))];
    const sinkHeads = layerReports.filter((r) => r.roles.primary.id === SINK_ROLE);
    if (sinkHeads.length >= 2 && plain.level === run.level && specials.length > 0) {
      const plainReports = sinkHeads.map((r) => plain.heads[r.layer * model.n_head + r.head]);
      const split = groupByRole(plainReports);
      const items = h('ul', { class: 'role-groups', id: 'why-sink-split' });
      for (const g of split) {
        const info = roleInfo(model, g.id);
        items.appendChild(
          h(
            'li',
            {},
            h('span', { class: 'badge', style: roleStyle(info.color) }, g.name),
            ` ${g.heads.length === 1 ? 'head' : 'heads'} ${list(g.heads)}. ${headName(g.example.head)}: ${g.example.roles.primary.evidence}`,
          ),
        );
      }
      this.body.append(
        h(
          'p',
          {},
          `Weight parked on a special token is mostly a way of doing nothing (see that role's typical function), so the ${sinkHeads.length} sink heads are better told apart by what they do with the rest. `,
          `With ${specials.join(' and ')} left out and each row rescaled to sum to one, they split like this (tick “Hide special tokens” to see it in the heatmaps):`,
        ),
        items,
      );
    }

    if (dec && dec.layer === state.layer) {
      const norms = Array.from(dec.contribution_norms.data);
      const order = norms.map((n, i) => [n, i] as const).sort((a, b) => b[0] - a[0]);
      const total = norms.reduce((a, b) => a + b, 0) || 1;
      const top = order.slice(0, 3);
      const low = order[order.length - 1];
      const t = run.tokens[dec.token];
      const token = t ? tokenShown(t) : '?';
      this.body.append(
        h(
          'p',
          { id: 'why-contributions' },
          `For “${tokenLabel(token, 20)}”, the heads adding most to the layer's output are `,
          top
            .map(
              ([n, i]) =>
                `${headName(i).toLowerCase()} (‖c‖ ${fixed(n, 2)}, ${roleInfo(model, layerReports[i].roles.primary.id).name.toLowerCase()})`,
            )
            .join(', '),
          `; together they carry ${fixed((top.reduce((a, [n]) => a + n, 0) / total) * 100, 0)} % of the summed norms, while ${headName(low[1]).toLowerCase()} adds least (${fixed(low[0], 2)}). `,
          'Pick another token above and the ranking changes: W_O weighs the heads by what they found for that token, it does not average them.',
        ),
      );
    }

    const counts = new Map<string, number>();
    for (const r of run.heads) counts.set(r.roles.primary.id, (counts.get(r.roles.primary.id) ?? 0) + 1);
    const parts = [...counts.entries()]
      .sort((a, b) => b[1] - a[1])
      .map(([id, n]) => `${n} ${roleInfo(model, id).name.toLowerCase()}`);
    this.body.append(
      h(
        'p',
        { class: 'muted' },
        `Across all ${model.n_layer * model.n_head} heads of the model on this text: ${parts.join(', ')}. `,
        'Roles here come from one sentence; `headscope atlas` measures them over a corpus, with syntactic and coreference roles checked against gold annotations.',
      ),
    );
  }

  /** Dormant heads of the layer (decoders): resting on the first token, they add almost nothing to
   *  this text; their next strongest pattern says what they do with the rest of their attention. */
  private dormantNote(ctx: ViewContext, layerReports: HeadReport[]): HTMLElement | null {
    const dormant = layerReports.filter((r) => r.roles.primary.id === DORMANT_ROLE);
    if (dormant.length === 0) return null;
    const rest = dormant
      .map((r) => `${headName(r.head).toLowerCase()} ${roleInfo(ctx.model, r.roles.secondary.id).name.toLowerCase()}`)
      .join(', ');
    const n = dormant.length;
    return h(
      'p',
      { id: 'why-dormant' },
      `${n === 1 ? 'One head' : `${n} heads`} of ${layerName(ctx.state.layer).toLowerCase()} ${n === 1 ? 'is' : 'are'} dormant on this text: ${n === 1 ? 'it rests' : 'they rest'} nearly all ${n === 1 ? 'its' : 'their'} attention on the first token, whose value is small, and so ${n === 1 ? 'adds' : 'add'} almost nothing to the output (“Remove this head” in the panel above measures it). `,
      `A dormant head can wake up on another text; what ${n === 1 ? 'it does' : 'they do'} with the attention left over is ${n === 1 ? 'its' : 'their'} next strongest pattern: ${rest}.`,
    );
  }

  /** "What removing heads does": every number measured on this text by ablation. */
  private removal(ctx: ViewContext, layerReports: HeadReport[]): HTMLElement {
    const { model, state, run, importance, importanceStatus } = ctx;
    const box = h('div', { id: 'why-removal' }, h('h3', {}, 'What removing heads does'));
    const n = model.n_layer * model.n_head;
    if (!importance) {
      const measuring = importanceStatus === 'measuring';
      const tooLong = importanceTooLong(run.n_tokens, n);
      if (tooLong && !measuring) {
        box.append(h('p', { id: 'why-importance-unavailable' }, tooLong));
        return box;
      }
      box.append(
        h(
          'p',
          {},
          `Take each of the ${n} heads out of the forward pass in turn (its output set to zero before W_O) and measure how much ${model.causal ? 'the next-token loss' : 'the sentence embedding'} of this text changes. `,
          importanceStatus && !measuring ? h('span', { class: 'error' }, importanceStatus) : '',
          ' ',
          h(
            'button',
            { type: 'button', id: 'why-measure', disabled: measuring, onclick: () => this.measure() },
            measuring ? 'Measuring…' : 'Measure importance',
          ),
        ),
      );
      return box;
    }
    const unit = unitLabel(importance.unit);
    const order = byImportance(importance);
    const name = (i: number) => headTag(Math.floor(i / model.n_head), i % model.n_head);
    const role = (i: number) => run.heads[i].roles.primary.name.toLowerCase();
    const k = Math.max(1, Math.round(n / 20));
    const share = topShare(importance, k);
    const halfShare = 1 - topShare(importance, Math.ceil(n / 2));
    const top = order[0];
    box.append(
      h(
        'p',
        { id: 'why-concentration', 'data-top-share': String(share) },
        `Removing one head at a time, the ${k} most important of the ${n} heads (${order.slice(0, k).map(name).join(', ')}) account for ${fixed(share * 100, 0)} % of the summed effects, the less important half for ${fixed(halfShare * 100, 0)} %. `,
        model.causal
          ? `The effect is the change of the mean next-token loss on this text, in nats (a head whose removal lowers the loss counts as 0 here).`
          : `The effect is 1 − cos between the sentence embedding (mean of the last layer's token vectors) with and without the head.`,
      ),
    );
    // The most important head against the LEAST_SET least important ones removed together.
    const least = leastImportant(importance, Math.min(LEAST_SET, n - 1));
    const vs = h(
      'p',
      { id: 'why-most-vs-least' },
      `Removing ${name(top)} (${role(top)}) alone: ${effectText(effectOf(importance, top))} (${unit}). Removing the ${least.length} least important heads together: measuring…`,
    );
    box.append(vs);
    const text = run.text;
    this.ablate(text, least)
      .then((r) => {
        if (ctx.run.text !== text || !vs.isConnected) return;
        const ratio = (effectOf(importance, top) ?? 0) / Math.max(r.effect, 1e-12);
        vs.dataset.leastEffect = String(r.effect);
        vs.textContent = `Removing ${name(top)} (${role(top)}) alone: ${effectText(effectOf(importance, top))} (${unit}). Removing the ${least.length} least important heads together (${least.map(([l, hd]) => headTag(l, hd)).join(', ')}): ${effectText(r.effect)} (${unit})${r.effect > 0 && ratio > 1 ? `, ${fixed(ratio, ratio < 10 ? 1 : 0)}× less than that one head` : ''}. Many heads can go with little change; a few cannot.`;
      })
      .catch((e) => {
        if (vs.isConnected) vs.textContent += ` (failed: ${(e as Error).message})`;
      });
    // Heads of the selected layer: the most and the least important, with their roles.
    const H = model.n_head;
    const inLayer = layerReports
      .map((r) => state.layer * H + r.head)
      .sort((a, b) => rankOf(importance, a) - rankOf(importance, b));
    const hi = inLayer[0],
      lo = inLayer[inLayer.length - 1];
    if (hi !== undefined && lo !== undefined && hi !== lo) {
      const sameRole = run.heads[hi].roles.primary.id === run.heads[lo].roles.primary.id;
      box.append(
        h(
          'p',
          { id: 'why-layer-contrast' },
          `In ${layerName(state.layer).toLowerCase()}, ${headName(hi % H).toLowerCase()} (${role(hi)}) ranks #${rankOf(importance, hi)} of ${n} (${effectText(effectOf(importance, hi))}, ${unit}) and ${headName(lo % H).toLowerCase()} (${role(lo)}) #${rankOf(importance, lo)} (${effectText(effectOf(importance, lo))}). `,
          sameRole
            ? 'Both show the same dominant pattern, yet removing them does not cost the same: where a head looks does not say how much the rest of the network relies on it.'
            : 'The same layer, two different patterns, and the network leans on one far more than on the other.',
        ),
      );
    }
    const rho = importance.spearman;
    box.append(
      h(
        'p',
        { class: 'muted small', id: 'why-proxy' },
        `Measured in ${fixed(importance.seconds, 1)} s (${n} reruns of this text from the head's layer on). A cheap stand-in that needs no reruns, the size of each head's contribution relative to the residual stream, ranks the heads with Spearman ρ = ${rho === null ? '–' : fixed(rho, 2)} against these effects. One text is a small sample: “headscope ablate” measures importance over a corpus (docs/causal.md).`,
      ),
    );
    return box;
  }
}
