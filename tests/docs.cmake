# docs/: every registered policy is documented, and every documented one exists.
add_test(NAME docs.policies COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/docs_policies.sh $<TARGET_FILE:moesim>
         ${PROJECT_SOURCE_DIR}/docs/policies.md)
# the README stays short: what moesim is for, the two commands, the layout, a tour, links
add_test(NAME docs.readme_short COMMAND sh -c "n=$(wc -l < ${PROJECT_SOURCE_DIR}/README.md); echo \"README.md: $n lines\"; [ $n -le 300 ]")
