// Registration of "Model overview": every layer × head as a role-badged thumbnail. It needs the
// attention of all layers, fetched as 8-bit values (plenty for thumbnails); on a long text (maps
// streamed, or dense but over POOLED_FROM_TOKENS) the pooled overview of every layer instead.
import { mounted, type ViewDefinition } from '../context';
import { ModelView } from './model-view';
import './model.css';

/** Widest the grid of thumbnails may be, in CSS pixels. */
const MAX_WIDTH = 1080;
/**
 * From this many tokens the thumbnails come from the pooled overviews even when the server keeps
 * the dense maps: every layer's maps at 800 tokens are 170 MB even as 8-bit values, and a
 * thumbnail shows no more than the overview's blocks.
 */
const POOLED_FROM_TOKENS = 512;

export const modelView: ViewDefinition = {
  id: 'model',
  label: 'Model overview',
  followsMaps: true,
  streamed: true,
  create(host) {
    const view = new ModelView({ select: (layer, head) => host.change({ layer, head }) }, MAX_WIDTH);
    return mounted(view, async (ctx) => {
      const { text, level } = ctx.state;
      const pooled = ctx.run.streamed || (ctx.run.n_tokens > POOLED_FROM_TOKENS && !!ctx.run.overview);
      if (pooled && host.overview) {
        const overview = host.overview;
        return view.updateStreamed(ctx, (layer) => overview(text, layer));
      }
      view.update(ctx, await host.attention(text, level, null, 'uint8', ctx.maps));
    });
  },
};
