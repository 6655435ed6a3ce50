"""The app as a whole, above the pages' packages: every page's frame (setup_page: the sidebar naming
every page, signing in, the heartbeat, and the warm-up started once a first page is drawn) and the
server's warm-up of what the pages first show (warm_up)."""
