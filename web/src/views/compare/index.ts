// Registration of "Compare heads": heads A and B (state.compareA/B, kept in the URL as a= and b=
// while this view is shown) and their difference. It needs the attention of both heads' layers.
import { mounted, type ViewDefinition } from '../context';
import { CompareView } from './compare-view';
import './compare.css';

export const compareView: ViewDefinition = {
  id: 'compare',
  label: 'Compare heads',
  create(host) {
    const view = new CompareView({ change: (patch) => host.change(patch) });
    return mounted(view, async (ctx) => {
      const { text, level, compareA, compareB } = ctx.state;
      const [a, b] = await Promise.all([
        host.attention(text, level, compareA.layer),
        host.attention(text, level, compareB.layer),
      ]);
      view.update(ctx, a, b);
    });
  },
};
