// "Why several heads?": the general argument, then what this model's heads actually do on the
// current text: the roles found in the selected layer, which heads contribute most to the
// selected token's output, and how the roles spread over the whole model.

import type { Decomposition, HeadReport, RunResult } from '../../lib/api';
import { h, clear } from '../../lib/dom';
import { fixed, tokenLabel } from '../../lib/format';
import { roleInfo, roleStyle, type ViewContext } from '../context';
import { headName, layerName } from '../../lib/numbering';

/** Role id of heads that park their attention on [CLS]/[SEP]/BOS (analysis/roles.h, kSink). */
const SINK_ROLE = 'sink';

function list(items: number[]): string {
  const s = items.map((i) => String(i + 1));  // head numbers, counted from 1 (lib/numbering.ts)
  return s.length <= 1 ? s.join('') : `${s.slice(0, -1).join(', ')} and ${s[s.length - 1]}`;
}

/** Heads of one layer grouped by primary role, largest group first. */
export function groupByRole(reports: HeadReport[]): { id: string; name: string; heads: number[]; example: HeadReport }[] {
  const groups = new Map<string, { id: string; name: string; heads: number[]; example: HeadReport }>();
  for (const r of reports) {
    const g = groups.get(r.roles.primary.id) ?? { id: r.roles.primary.id, name: r.roles.primary.name, heads: [], example: r };
    g.heads.push(r.head);
    if ((r.roles.primary.score ?? 0) > (g.example.roles.primary.score ?? 0)) g.example = r;
    groups.set(g.id, g);
  }
  return [...groups.values()].sort((a, b) => b.heads.length - a.heads.length || a.heads[0] - b.heads[0]);
}

export class WhyHeadsView {
  readonly el: HTMLElement;
  private body: HTMLElement;

  constructor() {
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
        'Whether the heads really divide the work is a question about a trained model, and this one answers it below.',
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

    // A head that parks most of its weight on special tokens still spends the rest somewhere, and
    // that remainder is where such heads differ: their roles once the special tokens are left out.
    // The special tokens this model put in the text ([CLS] and [SEP], <s>, ...); none, as with
    // SmolLM2 on plain text, leaves nothing to take out and the section away.
    const specials = [...new Set(run.tokens.filter((t) => t.special).map((t) => t.text))];
    const sinkHeads = layerReports.filter((r) => r.roles.primary.id === SINK_ROLE);
    if (sinkHeads.length >= 2 && plain.level === run.level && specials.length > 0) {
      const plainReports = sinkHeads.map((r) => plain.heads[r.layer * model.n_head + r.head]);
      const split = groupByRole(plainReports);
      const items = h('ul', { class: 'role-groups', id: 'why-sink-split' });
      for (const g of split) {
        const info = roleInfo(model, g.id);
        items.appendChild(
          h('li', {}, h('span', { class: 'badge', style: roleStyle(info.color) }, g.name), ` ${g.heads.length === 1 ? 'head' : 'heads'} ${list(g.heads)}. ${headName(g.example.head)}: ${g.example.roles.primary.evidence}`),
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
      const token = run.tokens[dec.token]?.text ?? '?';
      this.body.append(
        h(
          'p',
          { id: 'why-contributions' },
          `For “${tokenLabel(token, 20)}”, the heads adding most to the layer's output are `,
          top.map(([n, i]) => `${headName(i).toLowerCase()} (‖c‖ ${fixed(n, 2)}, ${roleInfo(model, layerReports[i].roles.primary.id).name.toLowerCase()})`).join(', '),
          `; together they carry ${fixed((top.reduce((a, [n]) => a + n, 0) / total) * 100, 0)} % of the summed norms, while ${headName(low[1]).toLowerCase()} adds least (${fixed(low[0], 2)}). `,
          'Pick another token above and the ranking changes: W_O weighs the heads by what they found for that token, it does not average them.',
        ),
      );
    }

    const counts = new Map<string, number>();
    for (const r of run.heads) counts.set(r.roles.primary.id, (counts.get(r.roles.primary.id) ?? 0) + 1);
    const parts = [...counts.entries()].sort((a, b) => b[1] - a[1]).map(([id, n]) => `${n} ${roleInfo(model, id).name.toLowerCase()}`);
    this.body.append(
      h(
        'p',
        { class: 'muted' },
        `Across all ${model.n_layer * model.n_head} heads of the model on this text: ${parts.join(', ')}. `,
        'Roles here come from one sentence; `headscope atlas` measures them over a corpus, with syntactic and coreference roles checked against gold annotations.',
      ),
    );
  }
}
