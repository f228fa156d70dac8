# docs/: every registered policy is documented, and every documented one exists.
add_test(NAME docs.policies COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/docs_policies.sh $<TARGET_FILE:moesim>
         ${PROJECT_SOURCE_DIR}/docs/policies.md)
# the README stays short: what moesim is for, the two commands, the layout, a tour, links
add_test(NAME docs.readme_short COMMAND sh -c "n=$(wc -l < ${PROJECT_SOURCE_DIR}/README.md); echo \"README.md: $n lines\"; [ $n -le 300 ]")
# every document the code and the docs cite is in the repository, every Markdown link resolves,
# and every source id a profile cites is listed in docs/sources.md
add_test(NAME docs.links COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/docs_links.sh ${PROJECT_SOURCE_DIR})
