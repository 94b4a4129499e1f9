"""The course's own tooling: its chapters and the guide's map onto them (``chapters``, re-exported
here), the covers and guide tables chapters show, the closed forms of chapter 14 (``derivations``),
and the notebook tools behind ``make lab``, ``make notebooks`` and ``make exercises`` (``nbtools``,
``nbtidy``).

    chapters.py      CHAPTERS, the guide's sections, where each is answered, the course map
    guide.py         the guide's sections and titles
    guide_tables.py  the guide's tables, beside the published rows
    cover.py         a chapter's first-screen picture
    derivations.py   the closed forms an interviewer asks for (chapter 14)
    nbtools.py       make lab / notebooks / exercises: run, execute, generate
    nbtidy.py        a notebook's metadata and tags kept tidy
"""

from parlab.course.chapters import (
    BEYOND,
    CHAPTERS,
    COURSE_DIR,
    EXERCISES,
    EXERCISES_DIR,
    GUIDE_QUESTIONS,
    PARTS,
    ROOT_DIR,
    Chapter,
    CourseMap,
    Exercise,
    MapRow,
    Where,
    anchor,
    beyond_chapter,
    chapters_for,
    compact_sections,
    course_map,
    exercises_for,
    heading_text,
    map_problems,
    notebook_headings,
    part,
    question_map,
    readme_table,
    section_map,
    sections_named,
    unlinkable,
    where,
)

__all__ = ['ROOT_DIR', 'COURSE_DIR', 'EXERCISES_DIR', 'Chapter', 'CHAPTERS', 'BEYOND', 'beyond_chapter', 'GUIDE_QUESTIONS', 'PARTS', 'part', 'chapters_for', 'question_map', 'heading_text', 'anchor', 'unlinkable', 'sections_named', 'notebook_headings', 'Where', 'where', 'Exercise', 'EXERCISES', 'exercises_for', 'MapRow', 'section_map', 'map_problems', 'CourseMap', 'course_map', 'compact_sections', 'readme_table']
