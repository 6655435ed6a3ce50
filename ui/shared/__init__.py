"""What the pages share: the page frame's parts (links between pages, published anchors, tables), each
browser's session and space, signing in, the checkpoint picker, the cached calls into lab, settings kept in
the URL, text from users shown inert, models' and presets' names, coloured text, charts more than one page
draws, and the class board's store. It imports lab only, never a page's package."""
