// Registration of "Model overview": every layer × head as a role-badged thumbnail. It needs the
// attention of all layers, fetched as 8-bit values (plenty for thumbnails); on a long text (maps
// streamed) the pooled overview of every layer instead.
import { mounted, type ViewDefinition } from '../context';
import { ModelView } from './model-view';
import './model.css';

/** Widest the grid of thumbnails may be, in CSS pixels. */
const MAX_WIDTH = 1080;

export const modelView: ViewDefinition = {
  id: 'model',
  label: 'Model overview',
  followsMaps: true,
  streamed: true,
  create(host) {
    const view = new ModelView({ select: (layer, head) => host.change({ layer, head }) }, MAX_WIDTH);
    return mounted(view, async (ctx) => {
      const { text, level } = ctx.state;
      if (ctx.run.streamed && host.overview) {
        const overview = host.overview;
        return view.updateStreamed(ctx, (layer) => overview(text, layer));
      }
      view.update(ctx, await host.attention(text, level, null, 'uint8', ctx.maps));
    });
  },
};
