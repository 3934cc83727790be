-- A run's file texts wait here until the run is published (indexing/generations.py), so
-- read, grep and file listings keep answering from the published version while a
-- re-index runs, and a run that stops leaves them as they were. Publication moves the
-- run's rows into file_contents in the transaction that switches the generation; the
-- next run's start deletes what a stopped run left.
CREATE TABLE file_contents_staged (
    repository_id bigint  NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    path          text    NOT NULL,
    generation    bigint  NOT NULL,
    content       text    NOT NULL,
    line_count    integer NOT NULL,
    PRIMARY KEY (repository_id, path)
);
