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
