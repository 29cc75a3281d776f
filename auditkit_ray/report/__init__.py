"""Reports: terminal tables, Markdown, JUnit XML, a self-contained HTML report, a shields.io badge."""
