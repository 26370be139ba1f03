# mk/readme.mk - the SwiftPM example of README.md, built and run as a user would (issue 20).
# Part of `make test`.
#
#   make readme-check
#
# Scripts/readme-check.sh takes the blocks marked <!-- readme-check: ... --> from README.md
# (Package.swift, main.swift and the expected output), builds them as a package next to a folder
# `crunloop` pointing at this checkout, in .build-readme/, runs it and compares its output.

.PHONY: readme-check
readme-check:
	SWIFT='$(SWIFT)' Scripts/readme-check.sh
