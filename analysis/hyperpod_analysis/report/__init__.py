"""The benchmark report: genai-bench result files -> measurements (:mod:`.results`) -> colocated vs DPD per
cell (:mod:`.analysis`) -> Markdown, HTML and PNG charts (:mod:`.render`)."""
