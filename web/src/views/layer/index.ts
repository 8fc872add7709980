// Registration of "Layer heads": every head of the selected layer as a heatmap tile.
import { mounted, type ViewDefinition } from '../context';
import { LayerView } from './layer-view';
import './layer.css';

export const layerView: ViewDefinition = {
  id: 'layer',
  label: 'Layer heads',
  followsMaps: true,
  streamed: true,
  create(host) {
    const view = new LayerView({ selectHead: (head) => host.change({ head }) });
    return mounted(view, async (ctx, layer) => view.update(ctx, layer));
  },
};
