// The collapsible learning context above the explorer: objectives, where multi-head attention
// sits in a transformer, why it matters (with head counts of well-known models and grouped-query
// attention), and the key takeaways. Figures about this model come from /api/model.

import { kvCountText } from '../../lib/kv-groups';
import type { ModelInfo } from '../../lib/api';
import { h } from '../../lib/dom';

/** Published head counts; kv = key/value heads (fewer than query heads under GQA/MQA). */
export const MODERN_MODELS: readonly { name: string; layers: number; heads: number; kv: number; source: string }[] = [
  { name: 'BERT-base (2018)', layers: 12, heads: 12, kv: 12, source: 'Devlin et al., 2019' },
  { name: 'GPT-3 175B (2020)', layers: 96, heads: 96, kv: 96, source: 'Brown et al., 2020, table 2.1' },
  { name: 'Llama 2 70B (2023)', layers: 80, heads: 64, kv: 8, source: 'Touvron et al., 2023' },
  { name: 'Mistral 7B (2023)', layers: 32, heads: 32, kv: 8, source: 'Jiang et al., 2023, table 1' },
  { name: 'Llama 3 8B (2024)', layers: 32, heads: 32, kv: 8, source: 'model config.json' },
  { name: 'Llama 3 70B (2024)', layers: 80, heads: 64, kv: 8, source: 'model config.json' },
];

/** The eight steps of the transformer walk-through this page belongs to; step 5 is this one. */
export const STEPS: readonly string[] = [
  'Tokens',
  'Embeddings',
  'Q, K, V',
  'Q·Kᵀ + softmax',
  'Multi-head attention',
  'Feed-forward',
  'Residual + norm',
  'Output',
];
export const THIS_STEP = 5;

function card(title: string, marker: string, ...body: (Node | string)[]): HTMLElement {
  return h(
    'article',
    { class: 'context-card' },
    h('h3', {}, h('span', { class: 'marker', 'aria-hidden': 'true' }, marker), title),
    ...body,
  );
}

/** The learning context as one collapsed strip (so that the text box and the heatmaps fit the
 *  first screen): the step and the page's title in the summary, `intro` and the four cards inside. */
export function learningContext(model: ModelInfo, ...intro: Node[]): HTMLElement {
  const steps = h('ol', { class: 'steps', 'aria-label': 'transformer steps' });
  STEPS.forEach((s, i) =>
    steps.appendChild(
      h(
        'li',
        {
          class: i + 1 === THIS_STEP ? 'current' : i + 1 < THIS_STEP ? 'done' : '',
          'aria-current': i + 1 === THIS_STEP ? 'step' : null,
        },
        h('span', { class: 'step-no' }, String(i + 1)),
        s,
      ),
    ),
  );
  const table = h(
    'table',
    { class: 'models-table' },
    h(
      'thead',
      {},
      h('tr', {}, h('th', {}, 'Model'), h('th', {}, 'Layers'), h('th', {}, 'Query heads'), h('th', {}, 'K/V heads')),
    ),
  );
  const body = h('tbody');
  for (const m of MODERN_MODELS)
    body.appendChild(
      h(
        'tr',
        { title: m.source },
        h('td', {}, m.name),
        h('td', {}, String(m.layers)),
        h('td', {}, String(m.heads)),
        h('td', {}, kvCountText(m.kv, m.heads)),
      ),
    );
  body.appendChild(
    h(
      'tr',
      { class: 'this-model' },
      h('td', {}, `${model.name} (this page)`),
      h('td', {}, String(model.n_layer)),
      h('td', {}, String(model.n_head)),
      h('td', {}, kvCountText(model.n_kv_head, model.n_head)),
    ),
  );
  table.appendChild(body);

  const totalHeads = model.n_layer * model.n_head;
  return h(
    'details',
    { class: 'learning-context', id: 'learning-context' },
    h(
      'summary',
      {},
      h('span', { class: 'kicker' }, `Step ${THIS_STEP} of ${STEPS.length}`),
      h('h1', {}, 'Multi-head attention, one head at a time'),
      h(
        'span',
        { class: 'muted small context-more' },
        'Learning context: objectives · where we are · why it matters · takeaways',
      ),
    ),
    h('div', { class: 'context-intro' }, ...intro),
    h(
      'div',
      { class: 'context-grid' },
      card(
        'Learning objectives',
        '1',
        h(
          'ul',
          {},
          h(
            'li',
            {},
            'Explain what one attention head computes, and why a layer runs several of them side by side instead of one big one.',
          ),
          h(
            'li',
            {},
            "Read a head's attention map and tell a head that tracks positions from one that parks on special tokens or follows content.",
          ),
          h(
            'li',
            {},
            "Follow the numbers from each head's output, through the concatenation and W_O, to the layer's output.",
          ),
        ),
      ),
      card(
        'Where we are in the transformer',
        '2',
        h('p', { class: 'kicker' }, `Step ${THIS_STEP} of ${STEPS.length} · transformer fundamentals`),
        steps,
        h(
          'p',
          {},
          `Step 4 turned queries and keys into weights: softmax(Q·Kᵀ/√d_head). Here that computation runs ${model.n_head} times in parallel in every layer, each head with its own projections to d_head = ${model.d_head} dimensions; `,
          `the heads' results are joined and mixed by W_O. The mixture is added to the residual stream and flows into the feed-forward block (step 6, ${model.d_model} → ${model.d_ff} → ${model.d_model}), where most of the weights, and much of what the model has memorised, live.`,
        ),
      ),
      card(
        'Why it matters',
        '3',
        h(
          'p',
          {},
          'A softmax row is one budget of attention per token. A single head must spend it on one kind of relation at a time; with many heads the same token can at once follow its neighbour, its grammatical head and a distant antecedent. ',
          `That is why head counts grew with model size: this model has ${totalHeads} heads in all, recent large models have thousands.`,
        ),
        table,
        h(
          'p',
          {},
          h('strong', {}, 'Grouped-query attention (GQA). '),
          'During generation every key and value must be kept in memory for every earlier token. GQA lets a group of query heads share one key/value head: Llama 3 70B computes 64 attention patterns from 8 key/value heads, so that cache is 8 times smaller. ',
          'In the extreme, multi-query attention (used by PaLM) keeps a single key/value head. Each query head still forms its own pattern.',
        ),
      ),
      card(
        'Key takeaways',
        '4',
        h(
          'ul',
          {},
          h(
            'li',
            {},
            'Nobody assigns the heads their jobs: specialisation appears during training, which is why it has to be measured, as the statistics below do.',
          ),
          h(
            'li',
            {},
            `All heads of a layer are one batched matrix product, so adding heads costs little on parallel hardware: each works in only d_model / h = ${model.d_model} / ${model.n_head} = ${model.d_head} dimensions.`,
          ),
          h(
            'li',
            {},
            "The heads' outputs are concatenated and projected by W_O; equivalently, each head adds its own contribution to the layer's output.",
          ),
        ),
      ),
    ),
  );
}
