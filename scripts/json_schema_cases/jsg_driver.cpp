// Runs llama.cpp's json_schema_to_grammar (the C++ converter) over schemas.
// Input (stdin): one JSON schema per line. Output (stdout): one JSON object per line,
// {"ok": true, "grammar": "..."} or {"ok": false, "error": "..."}; stderr gets the
// converter's warnings.
#include "json-schema-to-grammar.h"
#include "json.h"

#include <iostream>
#include <string>

int main() {
    std::string line;
    while (std::getline(std::cin, line)) {
        common_json out = common_json::object();
        try {
            out["grammar"] = json_schema_to_grammar(common_json::parse(line), true);
            out["ok"] = true;
        } catch (const std::exception & e) {
            out["ok"] = false;
            out["error"] = std::string(e.what());
        }
        std::cout << out.dump() << std::endl;
    }
    return 0;
}
