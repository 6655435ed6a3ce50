"""The look the pages' charts share."""

import plotly.graph_objects as go
import plotly.io as pio

# plotly_white's look, its layout's colours and axes only: the whole template (defaults for every kind of
# trace) took 14 of the 20 ms in which the live chart is built, every 2 s for every watching student, and
# was nine tenths of the chart sent to the browser
WHITE = go.layout.Template(
    layout={
        key: value
        for key, value in pio.templates["plotly_white"].layout.to_plotly_json().items()
        if key in ("colorway", "font", "paper_bgcolor", "plot_bgcolor", "xaxis", "yaxis", "hoverlabel")
    }
)

# Where a chart's legend goes, clear of its x axis's title (issue 51: a legend at y = -0.2 is anchored by
# its bottom, so its rows grew up over the title). Above the plot, where nothing else is drawn at its top;
# below it, anchored by its top far enough down that the tick labels and the title fit above it (plotly
# widens the margin to hold it), where the top holds a title or the guides' labels.
LEGEND_ABOVE = dict(orientation="h", x=0, y=1.02, yanchor="bottom")
LEGEND_BELOW = dict(orientation="h", x=0, y=-0.3, yanchor="top")
