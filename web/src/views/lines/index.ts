// Registration of "Head lines": the selected head as lines from queries to keys. On a long text
// (maps streamed) it draws a window of at most LINES_MAX tokens a side from the exact weights of a
// tile (/api/tile): the region of the head panel's zoomable map when it is that small, else a
// window of its own that its buttons move (and the map with it).
import { ApiError } from '../../lib/api';
import { linesWindow } from '../../lib/long';
import { mounted, type ViewDefinition } from '../context';
import { LinesView } from './lines-view';

export const linesView: ViewDefinition = {
  id: 'lines',
  label: 'Head lines',
  streamed: true,
  followsRegion: true,
  create(host) {
    const view = new LinesView({
      lock: (lock) => host.change({ lock }),
      showRegion: (r) => host.showRegion?.(r),
    });
    let ticket = 0;
    let text = '';
    return mounted(view, async (ctx, layer) => {
      const mine = ++ticket;
      if (!ctx.run.streamed) return view.update(ctx, layer);
      if (ctx.run.text !== text) view.start = 0;
      text = ctx.run.text;
      const w = linesWindow(ctx.region, ctx.run.n_tokens, view.start);
      if (!host.tile)
        return view.showProblem(
          ctx,
          'This long text’s exact weights are read from the server, and there is none here.',
        );
      const { text: t, layer: l, head } = ctx.state;
      try {
        const tile = await host.tile(t, l, head, w.q0, w.q1, w.k0, w.k1);
        if (mine === ticket) view.updateTile(ctx, w, tile);
      } catch (e) {
        if (!(e instanceof ApiError) && !(e instanceof TypeError)) throw e;
        if (mine === ticket)
          view.showProblem(ctx, `The weights of tokens ${w.q0}–${w.q1 - 1} could not be read: ${e.message}`);
      }
    });
  },
};
