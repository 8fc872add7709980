// Registration of "Compare heads": heads A and B (state.compareA/B, kept in the URL as a= and b=
// while this view is shown) and their difference. It needs the attention of both heads' layers;
// on a long text (maps streamed) the pooled overviews of both layers, compared block by block.
import { mounted, type ViewDefinition } from '../context';
import { CompareView } from './compare-view';
import './compare.css';

export const compareView: ViewDefinition = {
  id: 'compare',
  label: 'Compare heads',
  streamed: true,
  create(host) {
    const view = new CompareView({ change: (patch) => host.change(patch) });
    return mounted(view, async (ctx) => {
      const { text, level, compareA, compareB } = ctx.state;
      if (ctx.run.streamed && host.overview) {
        const [a, b] = await Promise.all([host.overview(text, compareA.layer), host.overview(text, compareB.layer)]);
        return view.updateStreamed(ctx, a, b);
      }
      const [a, b] = await Promise.all([
        host.attention(text, level, compareA.layer),
        host.attention(text, level, compareB.layer),
      ]);
      view.update(ctx, a, b);
    });
  },
};
