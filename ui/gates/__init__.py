"""The Gates page (pages/3_Gates.py): its sections and settings (settings), the unit gallery and one unit
(units), the span a student selects (span, over the span_select component), what drove a prediction
(prediction), a gate's heatmap (heatmap) and their charts (charts)."""
